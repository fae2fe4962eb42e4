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
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/procstat"
)

// inventedConcurrency is how many orders for invented SKU ids the run
// (-scenario invented-skus) has in flight at once.
const inventedConcurrency = 64

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
	writeVerdict(w, r.Violations)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// maxRSSGrowth is the bound the run asserts per instance.
const maxRSSGrowth = 100 << 20

// poolGoroutines is the goroutines an instance's MySQL pool may add
// between two readings: one per open connection, up to the default
// mysql.max_open_conns. Nothing per id: the defect left thousands.
const poolGoroutines = 64

// RunInvented starts the database, a private Redis and cfg's instances,
// sends requests (default 20,000) orders for SKU ids that do not exist,
// and measures what stayed.
func RunInvented(ctx context.Context, cfg Config, requests int) (res InventedResult, err error) {
	orDefault(&requests, 20000)
	base, err := scenarioConfig(cfg)
	if err != nil {
		return res, err
	}
	r, err := startScenario(ctx, base, "invented", 0)
	defer r.tearDown()
	if err != nil {
		return res, err
	}
	// Warm up: what is allocated once (pools, buffers) is not per id.
	const firstID = int64(1) << 40
	r.invent(ctx, firstID, 2000, nil)
	r.client.CloseIdleConnections()
	if err := r.usageBefore(ctx, &res); err != nil {
		return res, err
	}
	res.Statuses = map[int]int{}
	var mu sync.Mutex
	r.event("sending %d orders for invented sku ids", requests)
	r.invent(ctx, firstID+2000, requests, func(status int) {
		mu.Lock()
		res.Statuses[status]++
		mu.Unlock()
	})
	res.Requests = requests
	r.client.CloseIdleConnections()
	for i := range r.instances {
		if err := r.usageAfter(ctx, i, &res); err != nil {
			return res, err
		}
	}
	if res.RedisKeys[1], err = dbsize(ctx, r.redisAddrs[0]); err != nil {
		return res, err
	}
	if res.RedisKeys[1] != res.RedisKeys[0] {
		res.Violations = append(res.Violations, fmt.Sprintf("%d Redis keys after the burst; %d before", res.RedisKeys[1], res.RedisKeys[0]))
	}
	if n := res.Statuses[http.StatusNotFound]; n != requests {
		res.Violations = append(res.Violations, fmt.Sprintf("%d of %d answered 404 sku_not_found: %v", n, requests, res.Statuses))
	}
	return res, nil
}

// usageBefore reads every instance's RSS and goroutines, and the Redis
// keys, before the burst.
func (r *run) usageBefore(ctx context.Context, res *InventedResult) (err error) {
	res.Instances = make([]InstanceUsage, len(r.instances))
	for i := range r.instances {
		u := &res.Instances[i]
		u.RSSBefore = r.rss(i)
		if u.GoroutinesBefore, err = r.goroutines(ctx, i); err != nil {
			return err
		}
	}
	res.RedisKeys[0], err = dbsize(ctx, r.redisAddrs[0])
	return err
}

// usageAfter reads instance i's RSS and goroutines after the burst and
// checks their growth.
func (r *run) usageAfter(ctx context.Context, i int, res *InventedResult) (err error) {
	u := &res.Instances[i]
	// Goroutines of closed connections end shortly: wait, bounded.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if u.GoroutinesAfter, err = r.goroutines(ctx, i); err != nil {
			return err
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
	return nil
}

// invent sends n orders for ids first, first+1, ... round-robin over the
// instances, inventedConcurrency at a time, each from a shopper of its own;
// status, if not nil, gets each answer's status (0: no answer).
func (r *run) invent(ctx context.Context, first int64, n int, status func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range inventedConcurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				user := fmt.Sprintf("attacker-%d", i)
				url := r.baseURLs[(int(i)+w)%len(r.baseURLs)] + "/api/v1/orders"
				body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, first+i, user)
				code := 0
				if tok, err := r.shopperToken(user); err == nil {
					p, _ := r.post(ctx, url, body, tok, "")
					code = p.status
				}
				if status != nil {
					status(code)
				}
			}
		})
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
	v, found, err := r.metric(ctx, i, "go_goroutines ")
	if err == nil && !found {
		err = fmt.Errorf("instance-%d /metrics: no go_goroutines", i)
	}
	return int(v), err
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
