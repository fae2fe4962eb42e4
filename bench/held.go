package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seckill/seckill/internal/auth"
)

// The held-connections rows (-held N): N shoppers each holding one
// keep-alive connection, as a flash sale's crowd does, and each sending
// its next order as soon as the last is answered. k6 cannot hold 10,000
// virtual users on this box, so this client is Go's own: raw HTTP/1.1 on
// net.Conn, a new buyer (user and token) per request, as bench.js.

// heldResult is what a held-connections run answered.
type heldResult struct {
	seconds                                         float64
	requests, created, rejected, unavailable, other int64
	failed                                          int64 // connections that broke: a write, a read or a close
	p50, p95, p99                                   float64
	idleKB                                          float64 // the service's resident memory per connection held idle, before any request
}

// fill copies the run's answers into the row, as readSummary does for k6's.
func (h heldResult) fill(r *row) {
	r.Seconds, r.Requests = h.seconds, h.requests
	r.Orders, r.Rejects, r.Unavailable, r.Unexpected = h.created, h.rejected, h.unavailable, h.other+h.failed
	r.P50, r.P95, r.P99 = h.p50, h.p95, h.p99
	r.IdleKBPerConn = h.idleKB
	if h.seconds > 0 {
		r.OrdersPerSec = float64(h.created) / h.seconds
		r.RejectsPerSec = float64(h.rejected) / h.seconds
		r.ReqPerSec = float64(h.requests) / h.seconds
	}
}

// heldLoad is one run's plan: where, what, for how long, how many.
type heldLoad struct {
	addr, path string
	skus       []int64
	conns      int
	duration   time.Duration
	runID      string
	svcPID     int
}

// run dials every connection first (the service's memory with them all
// idle is read then), starts every buyer at once and stops them all at
// the deadline; a request still unanswered 60 s past it counts as failed.
func (l heldLoad) run(ctx context.Context) (heldResult, error) {
	var h heldResult
	before, sockets := residentKB(l.svcPID), socketsOf(l.svcPID)
	conns, err := l.dialAll(ctx)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		return h, err
	}
	if err := waitAccepted(ctx, l.svcPID, sockets+len(conns)); err != nil {
		return h, err
	}
	if before > 0 {
		h.idleKB = (residentKB(l.svcPID) - before) / float64(len(conns))
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		lats  []float64
		count [5]atomic.Int64 // created, rejected, unavailable, other, failed
	)
	go1 := make(chan struct{})
	var start, deadline time.Time // set before go1 is closed
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			mine := l.buyer(ctx, c, i, deadline, &count)
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	start = time.Now()
	deadline = start.Add(l.duration)
	close(go1)
	wg.Wait()
	h.seconds = time.Since(start).Seconds()
	h.created, h.rejected, h.unavailable, h.other, h.failed = count[0].Load(), count[1].Load(), count[2].Load(), count[3].Load(), count[4].Load()
	h.requests = h.created + h.rejected + h.unavailable + h.other
	slices.Sort(lats)
	h.p50, h.p95, h.p99 = quantile(lats, 0.50), quantile(lats, 0.95), quantile(lats, 0.99)
	return h, nil
}

// dialAll opens l.conns connections, 64 at a time, within a minute.
func (l heldLoad) dialAll(ctx context.Context) ([]net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conns := make([]net.Conn, l.conns)
	errs := make(chan error, 1)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var d net.Dialer
	for i := range conns {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := d.DialContext(ctx, "tcp", l.addr)
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	dialed := slices.DeleteFunc(conns, func(c net.Conn) bool { return c == nil })
	select {
	case err := <-errs:
		return dialed, fmt.Errorf("dialing %d connections (%d open; ulimit -n?): %w", l.conns, len(dialed), err)
	default:
		return dialed, nil
	}
}

// buyer sends orders on c until the deadline, each from a new buyer
// (per-user limits never refuse), and returns its latencies in ms.
func (l heldLoad) buyer(ctx context.Context, c net.Conn, i int, deadline time.Time, count *[5]atomic.Int64) []float64 {
	br := bufio.NewReader(c)
	var lats []float64
	var req []byte
	for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
		user := fmt.Sprintf("%s-%d-%d", l.runID, i, n)
		tok, err := auth.Mint([]byte(shopperSecret), auth.Claims{Subject: user, Audience: "seckill", TTL: time.Hour}, time.Now())
		if err != nil {
			count[4].Add(1)
			return lats
		}
		body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, l.skus[(i+n)%len(l.skus)], user)
		req = fmt.Appendf(req[:0], "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
			l.path, l.addr, tok, len(body), body)
		_ = c.SetDeadline(deadline.Add(time.Minute))
		sent := time.Now()
		status, err := roundTrip(c, br, req)
		if err != nil {
			count[4].Add(1)
			return lats
		}
		lats = append(lats, float64(time.Since(sent).Microseconds())/1000)
		switch status {
		case http.StatusCreated:
			count[0].Add(1)
		case http.StatusConflict, http.StatusTooManyRequests:
			count[1].Add(1)
		case http.StatusServiceUnavailable:
			count[2].Add(1)
		default:
			count[3].Add(1)
		}
	}
	return lats
}

// roundTrip writes req and reads one answer, its body discarded; a
// server that closes the connection after it is a failure too.
func roundTrip(c net.Conn, br *bufio.Reader, req []byte) (int, error) {
	if _, err := c.Write(req); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.Close {
		err = errors.New("the server closed the connection")
	}
	return resp.StatusCode, err
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// waitAccepted waits, within 30 s, until the service holds n sockets.
func waitAccepted(ctx context.Context, pid, n int) error {
	if pid <= 0 {
		return nil
	}
	for range 600 {
		if socketsOf(pid) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("the service did not accept its connections within 30s (%d sockets open, want %d)", socketsOf(pid), n)
}

// socketsOf counts the process's open sockets (0 if unread).
func socketsOf(pid int) int {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// residentKB is the process's resident memory now (VmRSS), 0 if unread.
func residentKB(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb
		}
	}
	return 0
}

// measureHeld is measure's held-connections side: the Go client in place
// of k6, between the same readings; the client's CPU is this process's.
func (b *bench) measureHeld(ctx context.Context, c benchCase, i int, base string, ids []int64, svcPID int, debugBase string, d *caseDB, m measurement) (measurement, error) {
	path := "/api/v1/orders"
	if c.ceiling {
		path = "/bench/constant"
	}
	l := heldLoad{addr: strings.TrimPrefix(base, "http://"), path: path, skus: ids, conns: c.held, duration: b.o.duration, runID: fmt.Sprintf("h%d", i), svcPID: svcPID}
	var prof profiler
	if debugBase != "" {
		prof.start(ctx, debugBase, b.o.out, fmt.Sprintf("%02d", i), b.o.duration)
	}
	self0 := selfCPU()
	m.cpu0 = sampleCPU(svcPID, b.dbPID, b.rs.Pid(), b.brokerPID)
	started := time.Now()
	h, err := l.run(ctx)
	m.wall = time.Since(started)
	m.cpu1 = sampleCPU(svcPID, b.dbPID, b.rs.Pid(), b.brokerPID)
	m.k6CPU = selfCPU() - self0
	for _, perr := range prof.wait() {
		fmt.Fprintln(os.Stderr, "bench:", perr)
	}
	if err != nil {
		return m, err
	}
	m.held = h
	m.after, err = b.counters(ctx, d)
	return m, err
}

// selfCPU is this process's CPU time so far (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeHeldRatios prints the held-connections rows against the ceiling's
// at the same connections (the mean of its runs), beside the goals.
func writeHeldRatios(t io.Writer, rows []row) {
	mean := func(name string) *row {
		var m row
		n := 0
		for _, r := range rows {
			if r.Case == name && r.Held > 0 && r.Variant == "" {
				n++
				m.Held, m.ReqPerSec, m.P99, m.RSSMB, m.IdleKBPerConn = r.Held, m.ReqPerSec+r.ReqPerSec, m.P99+r.P99, m.RSSMB+r.RSSMB, m.IdleKBPerConn+r.IdleKBPerConn
				m.Unexpected += r.Unexpected
			}
		}
		if n == 0 {
			return nil
		}
		f := float64(n)
		m.ReqPerSec, m.P99, m.RSSMB, m.IdleKBPerConn = m.ReqPerSec/f, m.P99/f, m.RSSMB/f, m.IdleKBPerConn/f
		return &m
	}
	ceil := mean(caseCeiling)
	if ceil == nil {
		return
	}
	rss := func(r *row) float64 { return r.RSSMB }
	for _, name := range []string{"locked, sold out", "locked"} {
		r := mean(name)
		if r == nil {
			continue
		}
		fmt.Fprintf(t, "%s / ceiling, %d conns held: req/s, p99, peak RSS\t%s, %s, %s\t≥ 0.8×, ≤ 1.5×, ≤ 1.2×\n",
			name, r.Held, ratio(r, ceil, reqs), ratio(r, ceil, p99), ratio(r, ceil, rss))
		fmt.Fprintf(t, "%s, %d conns held: failed or unexpected answers\t%d\t0\n", name, r.Held, r.Unexpected)
	}
	fmt.Fprintf(t, "resident memory per idle connection (ceiling)\t%.1f KB\t\n", ceil.IdleKBPerConn)
}
