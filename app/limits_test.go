package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

// serveConfig starts the service with cfg on a real listener and returns
// its host:port; it is shut down, and must stop cleanly, when the test ends.
func serveConfig(t *testing.T, cfg config.Config) string {
	t.Helper()
	return serveWith(t, cfg, func(ctx context.Context, ready func(string)) error {
		var out bytes.Buffer
		return app.Serve(ctx, cfg, testenv.Logger(), &out, ready)
	})
}

// serveWith validates cfg, runs serve (app.Serve or a variant of it) until
// the test ends, and returns the address serve announced; the service must
// stop cleanly.
func serveWith(t *testing.T, cfg config.Config, serve func(ctx context.Context, ready func(string)) error) string {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, func(a string) { addr <- a }) }()
	select {
	case a := <-addr:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
		return a
	case err := <-done:
		cancel()
		t.Fatalf("service did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		<-done
		t.Fatal("service did not start within 20s")
	}
	return ""
}

// dial opens a raw connection, closed when the test ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// closedBy reads conn until the server closes it (EOF or reset) and
// returns what it sent and how long that took; it fails the test when
// the connection is still open after bound.
func closedBy(t *testing.T, conn net.Conn, bound time.Duration) ([]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := conn.SetReadDeadline(start.Add(bound)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	elapsed := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v (read %q)", bound, got)
	}
	return got, elapsed
}

// trickle writes p one byte every interval until it is written, a write
// fails or stop is closed; it reports how many bytes went out.
func trickle(conn net.Conn, p []byte, interval time.Duration, stop <-chan struct{}) <-chan int {
	sent := make(chan int, 1)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		n := 0
		defer func() { sent <- n }()
		for n < len(p) {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write(p[n : n+1]); err != nil {
				return
			}
			n++
		}
	}()
	return sent
}

// skuState returns stock and sold through the admin API.
func skuState(t *testing.T, url string, id int64) (stock, sold float64) {
	t.Helper()
	status, sku := call(t, http.MethodGet, fmt.Sprintf("%s/admin/v1/skus/%d", url, id), "", "Authorization", "Bearer "+token)
	if status != http.StatusOK {
		t.Fatalf("admin get sku %d: %d %v", id, status, sku)
	}
	return sku["stock"].(float64), sku["sold"].(float64)
}

// TestHTTPLimits checks the protective limits of the real listener:
// slow clients are cut off, big requests refused with the contract's
// answer, and a user over the rate limit told to come back later, all
// without charging anyone.
func TestHTTPLimits(t *testing.T) {
	t.Parallel()
	const (
		readHeaderTimeout = 300 * time.Millisecond
		readTimeout       = time.Second
		maxBody           = 4096
		stock             = 10
	)
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.HTTP.ReadHeaderTimeout = readHeaderTimeout
	cfg.HTTP.ReadTimeout = readTimeout
	cfg.HTTP.MaxBodyBytes = maxBody
	cfg.MySQL.DSN = testenv.Database(t)
	cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 8, 8
	cfg.Redis.Addrs = []string{testenv.RedisAddr()}
	cfg.Admin.Token = token
	noShopperAuth(&cfg)
	cfg.Lock.Prefix = testenv.Name("test:limits:") + ":"
	cfg.Limits.PerUserRate = 1.0 / 60
	cfg.Limits.PerUserBurst = 2
	addr := serveConfig(t, cfg)
	url := "http://" + addr
	skuID := newSKU(t, url, stock, 5)
	orderBody := func(user string) string {
		return fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, skuID, user)
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		if left, sold := skuState(t, url, skuID); left != stock || sold != 0 {
			t.Errorf("sku after a refused request: stock %v sold %v; want %d, 0", left, sold, stock)
		}
	}
	// The server's bound on a slow client, with room for a loaded machine.
	const cutOff = 3 * time.Second

	t.Run("slow headers are cut off", func(t *testing.T) {
		conn := dial(t, addr)
		if _, err := io.WriteString(conn, "POST /api/v1/orders HTTP/1.1\r\nHost: seckill\r\n"); err != nil {
			t.Fatal(err)
		}
		// Keep the connection busy, a byte at a time: the deadline is on
		// the whole header block, not on silence.
		stop := make(chan struct{})
		sent := trickle(conn, []byte("X-Slow: "+strings.Repeat("s", 1000)), 20*time.Millisecond, stop)
		defer func() { close(stop); <-sent }()

		// Meanwhile another client is served.
		if status, body := call(t, http.MethodGet, url+"/healthz", ""); status != http.StatusOK {
			t.Errorf("GET /healthz beside the slow client = %d %v; want 200", status, body)
		}
		got, elapsed := closedBy(t, conn, cutOff)
		if elapsed < readHeaderTimeout/2 {
			t.Errorf("closed after %v; want the read header timeout (%v) to be what closed it", elapsed, readHeaderTimeout)
		}
		if len(got) > 0 {
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got)), nil)
			if err != nil || resp.StatusCode < 400 {
				t.Errorf("the slow client was answered %q; want the connection closed or an error status", got)
			}
		}
		t.Logf("cut off after %v, answer %q", elapsed, got)
	})

	t.Run("slow body is cut off and not charged", func(t *testing.T) {
		body := orderBody("slow-body")
		body += strings.Repeat(" ", 100-len(body)) // valid JSON: only the pace is wrong
		conn := dial(t, addr)
		head := "POST /api/v1/orders HTTP/1.1\r\nHost: seckill\r\nContent-Type: application/json\r\n" +
			"Idempotency-Key: slow-body\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		sent := trickle(conn, []byte(body), 25*time.Millisecond, stop) // 2.5s for the body
		got, elapsed := closedBy(t, conn, cutOff)
		close(stop)
		n := <-sent
		if n == len(body) {
			t.Errorf("the whole body went out at a byte per 25ms (%v): the read timeout (%v) did not cut it", elapsed, readTimeout)
		}
		t.Logf("cut off after %v, %d of %d body bytes sent, answer %q", elapsed, n, len(body), got)
		if len(got) > 0 {
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got)), nil)
			if err != nil {
				t.Fatalf("answer %q: %v", got, err)
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("slow body answered %d; want 400 or the connection closed", resp.StatusCode)
			}
		}
		unchanged(t)
	})

	t.Run("oversize body is 413 and not charged", func(t *testing.T) {
		conn := dial(t, addr)
		body := orderBody("oversize")
		body = body[:len(body)-1] + `,"pad":"` + strings.Repeat("p", 1<<20) + `"}`
		req := "POST /api/v1/orders HTTP/1.1\r\nHost: seckill\r\nContent-Type: application/json\r\n" +
			"Idempotency-Key: oversize\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		wrote := make(chan error, 1)
		go func() { _, err := io.WriteString(conn, req); wrote <- err }() // fails when the server hangs up
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a 1 MiB body: %v", err)
		}
		var e struct{ Error struct{ Code string } }
		derr := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || derr != nil || e.Error.Code != "request_too_large" {
			t.Errorf("1 MiB body = %d %q (%v); want 413 request_too_large", resp.StatusCode, e.Error.Code, derr)
		}
		// The server does not read the rest: it hangs up.
		closedBy(t, conn, 10*time.Second)
		if err := <-wrote; err == nil {
			t.Log("the whole 1 MiB body was written before the server hung up")
		}
		unchanged(t)
	})

	t.Run("header block over the limit is 431", func(t *testing.T) {
		headers := func(size int) (int, []byte) {
			conn := dial(t, addr)
			req := "GET /healthz HTTP/1.1\r\nHost: seckill\r\nX-Big: " + strings.Repeat("h", size) + "\r\nConnection: close\r\n\r\n"
			wrote := make(chan struct{})
			go func() { defer close(wrote); _, _ = io.WriteString(conn, req) }()
			defer func() { <-wrote }()
			if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("headers of %d bytes: no answer: %v", size, err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b
		}
		if status, body := headers(12 << 10); status != http.StatusOK {
			t.Errorf("a 12 KiB header block = %d %s; want 200", status, body)
		}
		// http.Server allows MaxHeaderBytes (16 KiB) plus 4 KiB of slack.
		if status, body := headers(24 << 10); status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("a 24 KiB header block = %d %s; want 431", status, body)
		}
	})

	t.Run("per-user rate limit is 429 with Retry-After", func(t *testing.T) {
		place := func(user, key string) (int, string, http.Header) {
			req, err := http.NewRequest(http.MethodPost, url+"/api/v1/orders", strings.NewReader(orderBody(user)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct{ Error struct{ Code string } }
			_ = json.NewDecoder(resp.Body).Decode(&e)
			return resp.StatusCode, e.Error.Code, resp.Header
		}
		for i := range 2 { // the burst
			if status, code, _ := place("rated", fmt.Sprintf("rated-%d", i)); status != http.StatusCreated {
				t.Fatalf("order %d of user rated = %d %q; want 201 (within the burst of 2)", i+1, status, code)
			}
		}
		status, code, h := place("rated", "rated-2")
		if status != http.StatusTooManyRequests || code != "rate_limited" {
			t.Errorf("order 3 of user rated = %d %q; want 429 rate_limited", status, code)
		}
		if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
			t.Errorf("Retry-After = %q; want a positive number of seconds", h.Get("Retry-After"))
		}
		// The limit is per user: another buyer is served.
		if status, code, _ := place("other", "other-0"); status != http.StatusCreated {
			t.Errorf("order of another user = %d %q; want 201", status, code)
		}
		if left, sold := skuState(t, url, skuID); sold != 3 || left != stock-3 {
			t.Errorf("sku after 3 orders and a refusal: stock %v sold %v; want %d, 3", left, sold, stock-3)
		}
	})
}
