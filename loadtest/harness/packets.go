package harness

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seckill/seckill/lock/locktest"
)

// packetClock times each order request by its first packet on loopback,
// captured by tshark, keyed by its Idempotency-Key (loadtest/README.md).
type packetClock struct {
	cmd  *exec.Cmd
	port int           // where probes go
	done chan struct{} // closed once tshark's output is read to its end
	mu   sync.Mutex
	seen map[string]time.Time // the first packet of each key
}

// startPackets captures the first packet of every POST sent to ports,
// and returns once a probe sent to the first port has been captured; an
// error when tshark is not installed or cannot capture.
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
	c := &packetClock{done: make(chan struct{}), seen: map[string]time.Time{}, port: ports[0],
		cmd: exec.Command(bin, "-i", "lo", "-f", filter, "-s", "600", "-B", "64", "-l", "-n", "-T", "fields", "-e", "frame.time_epoch", "-e", "tcp.payload")}
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
	if err := c.probe(ctx, "start"); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// probe sends POSTs keyed probe-<name>-<n> to the first port until tshark
// has printed one: then it captures, and has printed every packet before.
func (c *packetClock) probe(ctx context.Context, name string) error {
	sent := 0
	return locktest.Poll(ctx, "tshark's probe "+name, 30*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		sent++
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/healthz", c.port), nil)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("probe-%s-%d", name, sent))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for k := range sent {
			if _, ok := c.seen[fmt.Sprintf("probe-%s-%d", name, k+1)]; ok {
				return nil
			}
		}
		return errors.New("not printed yet")
	})
}

// read takes tshark's lines until it exits.
func (c *packetClock) read(out io.Reader, log io.Closer) {
	defer close(c.done)
	defer log.Close()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at, payload, _ := strings.Cut(sc.Text(), "\t")
		secs, err := strconv.ParseFloat(at, 64) // to half a microsecond
		b, _ := hex.DecodeString(payload)
		key := keyHeader.FindSubmatch(b)
		if err != nil || key == nil {
			continue
		}
		c.mu.Lock()
		if _, ok := c.seen[string(key[1])]; !ok {
			c.seen[string(key[1])] = time.Unix(0, int64(secs*1e9))
		}
		c.mu.Unlock()
	}
}

// arrivals stops the capture once tshark has printed every packet (in
// order: a probe sent last) and returns the first packet's time of each
// Idempotency-Key: a retry keeps the first arrival, as the service does.
func (c *packetClock) arrivals(ctx context.Context) (map[string]time.Time, error) {
	if err := c.probe(ctx, "end"); err != nil {
		return nil, err
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
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

// keyHeader finds a request's Idempotency-Key in its first segment.
var keyHeader = regexp.MustCompile("\r\nIdempotency-Key: ([^\r]*)\r\n")

// stop ends a capture arrivals did not.
func (c *packetClock) stop() {
	if c != nil && c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		<-c.done
		_ = c.cmd.Wait()
	}
}

// timeArrivals gives the crowds' buyers their first packet's time as
// their arrival, and says which clock timed them.
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
