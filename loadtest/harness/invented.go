package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/procstat"
)

// InventedConfig is the invented-SKU abuse run: Requests orders for SKU
// ids that do not exist, spread over the instances, Concurrency at a time.
type InventedConfig struct {
	Instances   int // default 1
	Requests    int // default 20000
	Concurrency int // default 64
	MySQLDSN    string
	ServiceBin  string
	Keep        bool
	Log         io.Writer
}

// InstanceUsage is what one instance held before and after the burst.
type InstanceUsage struct {
	RSSBefore, RSSAfter               int64 // bytes
	GoroutinesBefore, GoroutinesAfter int
}

// InventedResult is the outcome of the invented-SKU run.
type InventedResult struct {
	Requests   int
	Statuses   map[int]int // HTTP status → answers
	Instances  []InstanceUsage
	RedisKeys  [2]int // before, after (the run's private Redis)
	Violations []string
}

// Pass reports whether nothing lasting was allocated for invented ids.
func (r InventedResult) Pass() bool { return len(r.Violations) == 0 }

// WriteText prints the result.
func (r InventedResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "invented SKU ids: %d orders, answers %v\n", r.Requests, r.Statuses)
	for i, u := range r.Instances {
		fmt.Fprintf(w, "  instance-%d: RSS %.1f → %.1f MB (%+.1f), goroutines %d → %d\n", i,
			mb(u.RSSBefore), mb(u.RSSAfter), mb(u.RSSAfter-u.RSSBefore), u.GoroutinesBefore, u.GoroutinesAfter)
	}
	fmt.Fprintf(w, "  redis keys: %d → %d\n", r.RedisKeys[0], r.RedisKeys[1])
	if r.Pass() {
		fmt.Fprintln(w, "PASS")
		return
	}
	for _, v := range r.Violations {
		fmt.Fprintln(w, "FAIL:", v)
	}
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// maxRSSGrowth is the bound the run asserts per instance.
const maxRSSGrowth = 100 << 20

// poolGoroutines is the goroutines an instance's MySQL pool may add
// between two readings: one per open connection, up to the default
// mysql.max_open_conns. Nothing per id: the defect left thousands.
const poolGoroutines = 64

// RunInvented starts MariaDB's database, a private Redis and the
// instances, sends the burst, and measures what stayed.
func RunInvented(ctx context.Context, cfg InventedConfig) (res InventedResult, err error) {
	if cfg.Instances == 0 {
		cfg.Instances = 1
	}
	if cfg.Requests == 0 {
		cfg.Requests = 20000
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 64
	}
	base, err := normalize(Config{Instances: cfg.Instances, MySQLDSN: cfg.MySQLDSN, ServiceBin: cfg.ServiceBin, Keep: cfg.Keep, Log: cfg.Log})
	if err != nil {
		return res, err
	}
	r, err := startScenario(ctx, base, "invented", &http.Client{Timeout: 30 * time.Second})
	defer r.tearDown()
	if err != nil {
		return res, err
	}

	// Warm up: what is allocated once (pools, buffers) is not per id.
	const firstID = int64(1) << 40
	r.invent(ctx, firstID, 2000, cfg.Concurrency, nil)
	r.client.CloseIdleConnections()
	res.Instances = make([]InstanceUsage, len(r.instances))
	for i := range r.instances {
		u := &res.Instances[i]
		u.RSSBefore = r.rss(i)
		if u.GoroutinesBefore, err = r.goroutines(ctx, i); err != nil {
			return res, err
		}
	}
	if res.RedisKeys[0], err = dbsize(ctx, r.redisAddrs[0]); err != nil {
		return res, err
	}

	res.Statuses = map[int]int{}
	var mu sync.Mutex
	r.event("sending %d orders for invented sku ids", cfg.Requests)
	r.invent(ctx, firstID+2000, cfg.Requests, cfg.Concurrency, func(status int) {
		mu.Lock()
		res.Statuses[status]++
		mu.Unlock()
	})
	res.Requests = cfg.Requests
	r.client.CloseIdleConnections()

	for i := range r.instances {
		u := &res.Instances[i]
		// Goroutines of closed connections end shortly: wait, bounded.
		deadline := time.Now().Add(15 * time.Second)
		for {
			if u.GoroutinesAfter, err = r.goroutines(ctx, i); err != nil {
				return res, err
			}
			r.client.CloseIdleConnections()
			if u.GoroutinesAfter <= u.GoroutinesBefore+poolGoroutines || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond) // polling a counter, bounded above
		}
		u.RSSAfter = r.rss(i)
		if u.GoroutinesAfter > u.GoroutinesBefore+poolGoroutines {
			res.Violations = append(res.Violations, fmt.Sprintf("instance-%d: %d goroutines after the burst; %d before (+%d for the MySQL pool allowed)",
				i, u.GoroutinesAfter, u.GoroutinesBefore, poolGoroutines))
		}
		if u.RSSAfter-u.RSSBefore > maxRSSGrowth {
			res.Violations = append(res.Violations, fmt.Sprintf("instance-%d: RSS grew %.1f MB; want < 100 MB", i, mb(u.RSSAfter-u.RSSBefore)))
		}
	}
	if res.RedisKeys[1], err = dbsize(ctx, r.redisAddrs[0]); err != nil {
		return res, err
	}
	if res.RedisKeys[1] != res.RedisKeys[0] {
		res.Violations = append(res.Violations, fmt.Sprintf("%d Redis keys after the burst; %d before", res.RedisKeys[1], res.RedisKeys[0]))
	}
	if n := res.Statuses[http.StatusNotFound]; n != cfg.Requests {
		res.Violations = append(res.Violations, fmt.Sprintf("%d of %d answered 404 sku_not_found: %v", n, cfg.Requests, res.Statuses))
	}
	return res, nil
}

// invent sends n orders for ids first, first+1, ... round-robin over the
// instances; status, if not nil, gets each answer's status (0: no answer).
func (r *run) invent(ctx context.Context, first int64, n, conc int, status func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				url := r.baseURLs[(int(i)+w)%len(r.baseURLs)] + "/api/v1/orders"
				body := fmt.Sprintf(`{"sku_id":%d,"user_id":"attacker-%d","quantity":1}`, first+i, i)
				code := 0
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
				if err == nil {
					req.Header.Set("Content-Type", "application/json")
					err = r.signAs(req, fmt.Sprintf("attacker-%d", i))
				}
				if err == nil {
					if resp, err := r.client.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						code = resp.StatusCode
					}
				}
				if status != nil {
					status(code)
				}
			}
		}()
	}
	wg.Wait()
}

// rss returns the instance's resident set size in bytes (0 if unknown).
func (r *run) rss(i int) int64 {
	p := r.instances[i]
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	n, _ := procstat.RSS(p.cmd.Process.Pid)
	return n
}

// goroutines reads go_goroutines from the instance's /metrics.
func (r *run) goroutines(ctx context.Context, i int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.baseURLs[i]+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("instance-%d /metrics: no go_goroutines", i)
}

// dbsize asks a Redis server how many keys it holds.
func dbsize(ctx context.Context, addr string) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("*1\r\n$6\r\nDBSIZE\r\n")); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return 0, err
	}
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != ':' {
		return 0, fmt.Errorf("redis DBSIZE: %q", line)
	}
	return strconv.Atoi(string(line[1:]))
}

// signAs gives req the bearer token of shopper sub, signed with the
// run's auth.jwt.secret as the identity provider would: an attacker with
// accounts of its own, past authentication. Without a secret (target mode
// against auth.shopper none) req goes unsigned.
func (r *run) signAs(req *http.Request, sub string) error {
	if r.shopper == "" {
		return nil
	}
	tok, err := auth.Mint([]byte(r.shopper), auth.Claims{Subject: sub, Audience: config.Default().Auth.JWT.Audience, TTL: time.Hour}, time.Now())
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}
