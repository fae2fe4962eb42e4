package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seckill/seckill/lock/locktest"
)

// packetClock times each order request as the service's machine sees
// it: the kernel's timestamp of the request's first packet on loopback,
// captured by tshark (Debian's wireshark tools) as it goes, keyed by its
// Idempotency-Key. A client goroutine's own stamp is taken before the
// request is written, and on a busy 2-core box it can be off by hundreds
// of milliseconds; the packet's is not.
type packetClock struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once tshark's output is read to its end
	mu   sync.Mutex
	seen map[string]time.Time // the first packet of each key
}

// startPackets captures the first packet of every POST sent to ports (a
// segment whose payload starts with "POST"). It returns once a probe sent
// to the first port has been captured; an error when tshark is not
// installed or cannot capture (the caller then keeps its own stamps and
// says so).
func startPackets(ctx context.Context, dir string, ports []int) (*packetClock, error) {
	dst := make([]string, len(ports))
	for i, p := range ports {
		dst[i] = "tcp dst port " + strconv.Itoa(p)
	}
	filter := "(" + strings.Join(dst, " or ") + ") and tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x504f5354"
	bin, err := exec.LookPath("tshark")
	if err != nil {
		return nil, errors.New("tshark not installed (apt-get install tshark)")
	}
	log, err := os.Create(filepath.Join(dir, "tshark.log"))
	if err != nil {
		return nil, err
	}
	c := &packetClock{done: make(chan struct{}), seen: map[string]time.Time{},
		cmd: exec.Command(bin, "-i", "lo", "-f", filter, "-s", "600", "-l", "-n", "-T", "fields", "-e", "frame.time_epoch", "-e", "tcp.payload")}
	c.cmd.Stderr = log
	out, err := c.cmd.StdoutPipe()
	if err == nil {
		err = c.cmd.Start()
	}
	if err != nil {
		log.Close()
		return nil, err
	}
	go c.read(out, log)
	probe := 0
	err = locktest.Poll(ctx, "tshark capturing", 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		probe++
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), nil)
		req.Header.Set("Idempotency-Key", "probe-"+strconv.Itoa(probe))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for k := range probe {
			if _, ok := c.seen["probe-"+strconv.Itoa(k+1)]; ok {
				return nil
			}
		}
		return errors.New("no probe seen yet")
	})
	if err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// read takes tshark's lines until it exits.
func (c *packetClock) read(out io.Reader, log io.Closer) {
	defer close(c.done)
	defer log.Close()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at, payload, _ := strings.Cut(sc.Text(), "\t")
		sec, frac, _ := strings.Cut(at, ".")
		s, err1 := strconv.ParseInt(sec, 10, 64)
		ns, err2 := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		key := idempotencyKey(payload)
		if err1 != nil || err2 != nil || key == "" {
			continue
		}
		c.mu.Lock()
		if _, ok := c.seen[key]; !ok {
			c.seen[key] = time.Unix(s, ns)
		}
		c.mu.Unlock()
	}
}

// arrivals stops the capture and returns the first packet's time of each
// Idempotency-Key it saw: a request sent again with its key keeps the
// first arrival, as the service does.
func (c *packetClock) arrivals(ctx context.Context) (map[string]time.Time, error) {
	_ = c.cmd.Process.Signal(syscall.SIGINT) // tshark prints what it has and exits
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		return nil, errors.New("tshark did not exit")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	_ = c.cmd.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen, nil
}

// idempotencyKey is the Idempotency-Key header of a request's first
// segment, in hex as tshark prints it; "" without one.
func idempotencyKey(payloadHex string) string {
	b, err := hex.DecodeString(payloadHex)
	if err != nil {
		return ""
	}
	_, rest, ok := bytes.Cut(b, []byte("\r\nIdempotency-Key: "))
	if !ok {
		return ""
	}
	key, _, ok := bytes.Cut(rest, []byte("\r\n"))
	if !ok {
		return ""
	}
	return string(key)
}

// stop ends a capture arrivals did not.
func (c *packetClock) stop() {
	if c != nil && c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		<-c.done
		_ = c.cmd.Wait()
	}
}

// timeArrivals gives the crowds' buyers their first request's packet time
// as their arrival, in place of their own stamps, and says which clock
// timed them.
func timeArrivals(ctx context.Context, clock *packetClock, startErr error, crowds ...*fairRun) string {
	seen, err := map[string]time.Time(nil), startErr
	if err == nil {
		seen, err = clock.arrivals(ctx)
	}
	if err != nil {
		return "the clients' own stamps (" + err.Error() + ")"
	}
	timed, missing := 0, 0
	for _, fr := range crowds {
		for k := range fr.buyers {
			if at, ok := seen[fr.key(k)]; ok {
				fr.buyers[k].arrived = at
				timed++
			} else {
				missing++
			}
		}
	}
	if missing > 0 {
		return fmt.Sprintf("the kernel's timestamps of %d requests' first packets; %d not captured keep the client's stamp", timed, missing)
	}
	return fmt.Sprintf("the kernel's timestamps of the %d requests' first packets (tshark on lo)", timed)
}

// ports are the instances' API ports.
func (r *run) ports() []int {
	ps := make([]int, 0, len(r.baseURLs))
	for _, u := range r.baseURLs {
		if p, err := strconv.Atoi(u[strings.LastIndexByte(u, ':')+1:]); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}
