package app_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// pollInstance starts an instance whose long-polls' recheck is recheck.
func pollInstance(t *testing.T, dsn, redisAddr, prefix string, recheck time.Duration) string {
	t.Helper()
	cfg := instanceConfig(dsn, []string{redisAddr}, prefix)
	cfg.Order.LongPollRecheck = recheck
	return "http://" + serveConfig(t, cfg)
}

// polled is one long-poll's answer.
type polled struct {
	status  int
	etag    string
	applied string // Preference-Applied
	body    string
}

// longPoll reads url with If-None-Match tag and Prefer: wait=wait.
func longPoll(t *testing.T, url, tag, wait string) polled {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Error(err)
		return polled{}
	}
	req.Header.Set("If-None-Match", tag)
	req.Header.Set("Prefer", "wait="+wait)
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("long-poll %s: %v", url, err)
		return polled{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return polled{resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("Preference-Applied"), string(raw)}
}

// waitForHeld waits until the instance at url holds n long-polls.
func waitForHeld(t *testing.T, url string, n float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, url).value("seckill_long_polls") != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %v long-polls", url, n)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not a synchronisation by time
	}
}

// waiterOnB sells the one unit of a new SKU through A and makes a waiting
// order through B; it returns the sold order's id, the waiting one's and
// its ETag as B answers it.
func waiterOnB(t *testing.T, a, b string) (sold, waiting, tag string) {
	t.Helper()
	sku := newSKU(t, a, 1, 1)
	st, o := call(t, http.MethodPost, a+"/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"first","quantity":1}`, sku))
	if st != http.StatusCreated {
		t.Fatalf("first order = %d %v; want 201", st, o)
	}
	st, w := call(t, http.MethodPost, b+"/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"second","quantity":1,"wait":true}`, sku))
	if st != http.StatusAccepted {
		t.Fatalf("waiting order = %d %v; want 202", st, w)
	}
	sold, waiting = o["order_id"].(string), w["order_id"].(string)
	resp, err := client.Get(b + "/api/v1/orders/" + waiting)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if tag = resp.Header.Get("ETag"); resp.StatusCode != http.StatusOK || tag == "" {
		t.Fatalf("GET the waiting order = %d, ETag %q; want 200 with an ETag", resp.StatusCode, tag)
	}
	return sold, waiting, tag
}

// TestLongPoll_AnAllocationThroughAReachesAWaiterOnB: a waiter
// long-polling instance B hears of the unit a cancel through A gave it,
// over Redis pub/sub: B's recheck (10 s) is longer than the wait.
func TestLongPoll_AnAllocationThroughAReachesAWaiterOnB(t *testing.T) {
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:poll:") + ":"
	a := pollInstance(t, dsn, testenv.RedisAddr(), prefix, 10*time.Second)
	b := pollInstance(t, dsn, testenv.RedisAddr(), prefix, 10*time.Second)
	sold, waiting, tag := waiterOnB(t, a, b)

	answer := make(chan polled, 1)
	go func() { answer <- longPoll(t, b+"/api/v1/orders/"+waiting, tag, "8") }()
	waitForHeld(t, b, 1)
	if st, body := call(t, http.MethodPost, a+"/api/v1/orders/"+sold+"/cancel", ""); st != http.StatusOK {
		t.Fatalf("cancel through A = %d %v", st, body)
	}
	p := <-answer
	if p.status != http.StatusOK || p.etag == tag || p.applied != "wait=8" {
		t.Fatalf("long-poll on B = %d, ETag %q (was %q), Preference-Applied %q; want 200, a new ETag, wait=8", p.status, p.etag, tag, p.applied)
	}
	if st, o := call(t, http.MethodGet, b+"/api/v1/orders/"+waiting, ""); st != http.StatusOK || o["status"] != "pending" {
		t.Errorf("the waiter's order = %d %v; want pending", st, o)
	}
	if n, _ := scrape(t, b).histogram("seckill_long_poll_heard_seconds"); n != 1 {
		t.Errorf("B's seckill_long_poll_heard_seconds count = %d; want 1 (heard over pub/sub)", n)
	}
	if v := scrape(t, b).value("seckill_long_polls_answered_total", "how", "change"); v != 1 {
		t.Errorf("B's long-polls answered by change = %v; want 1", v)
	}
}

// TestLongPoll_WithRedisStoppedTheRecheckAnswers: with Redis down the
// publish is lost; B's recheck reads the order again and answers.
func TestLongPoll_WithRedisStoppedTheRecheckAnswers(t *testing.T) {
	srv := testenv.StartRedis(t)
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:poll:") + ":"
	a := pollInstance(t, dsn, srv.Addr, prefix, 100*time.Millisecond)
	b := pollInstance(t, dsn, srv.Addr, prefix, 100*time.Millisecond)
	sold, waiting, tag := waiterOnB(t, a, b)

	answer := make(chan polled, 1)
	go func() { answer <- longPoll(t, b+"/api/v1/orders/"+waiting, tag, "20") }()
	waitForHeld(t, b, 1)
	srv.Stop()
	if st, body := call(t, http.MethodPost, a+"/api/v1/orders/"+sold+"/cancel", ""); st != http.StatusOK {
		t.Fatalf("cancel through A with Redis down = %d %v", st, body)
	}
	p := <-answer
	if p.status != http.StatusOK || p.etag == tag {
		t.Fatalf("long-poll on B = %d, ETag %q (was %q); want 200 and a new ETag", p.status, p.etag, tag)
	}
	if st, o := call(t, http.MethodGet, b+"/api/v1/orders/"+waiting, ""); st != http.StatusOK || o["status"] != "pending" {
		t.Errorf("the waiter's order = %d %v; want pending", st, o)
	}
	if n, _ := scrape(t, b).histogram("seckill_long_poll_heard_seconds"); n != 0 {
		t.Errorf("B heard %d changes over pub/sub with Redis stopped; want 0 (the recheck answered)", n)
	}
}

// TestLongPoll_OutlastsTheServersTimeouts: a poll longer than
// http.read_timeout and http.write_timeout is answered 304 after its
// wait, not cut; and the instance's shutdown answers a held poll at once.
func TestLongPoll_OutlastsTheServersTimeouts(t *testing.T) {
	cfg := instanceConfig(testenv.Database(t), []string{testenv.RedisAddr()}, testenv.Name("test:poll:")+":")
	cfg.HTTP.ReadTimeout, cfg.HTTP.WriteTimeout, cfg.Order.RequestTimeout = 500*time.Millisecond, 500*time.Millisecond, 400*time.Millisecond
	url, stop := stoppable(t, cfg)
	sku := newSKU(t, url, 1, 1)
	st, o := call(t, http.MethodPost, url+"/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"u","quantity":1}`, sku))
	if st != http.StatusCreated {
		t.Fatalf("order = %d %v", st, o)
	}
	id := o["order_id"].(string)
	resp, err := client.Get(url + "/api/v1/orders/" + id)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tag := resp.Header.Get("ETag")

	start := time.Now()
	if p := longPoll(t, url+"/api/v1/orders/"+id, tag, "1"); p.status != http.StatusNotModified || p.etag != tag || p.applied != "wait=1" || p.body != "" {
		t.Fatalf("long-poll past the server's timeouts = %d, ETag %q, Preference-Applied %q, body %q; want 304, %q, wait=1, none", p.status, p.etag, p.applied, p.body, tag)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("304 after %v; want after the wait, 1s", took)
	}

	answer := make(chan polled, 1)
	go func() { answer <- longPoll(t, url+"/api/v1/orders/"+id, tag, "60") }()
	waitForHeld(t, url, 1)
	stop()
	if p := <-answer; p.status != http.StatusNotModified || p.etag != tag {
		t.Errorf("a poll held at shutdown = %d, ETag %q; want 304, %q", p.status, p.etag, tag)
	}
}
