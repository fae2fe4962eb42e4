package lock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock/locktest"
)

// redisAddr is the shared Redis, used by the tests that neither stop nor
// flush it and by the examples: SECKILL_TEST_REDIS_ADDR, or 127.0.0.1:6379.
var redisAddr = locktest.RedisAddr()

// TestMain skips the examples, saying why, when no Redis answers at
// redisAddr and SECKILL_TEST_REDIS_ADDR is unset; make test sets it, so
// there they run (and a Redis that does not answer fails them). The tests
// need the Redis either way, and fail saying so.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := ping(redisAddr); err != nil && !locktest.RedisAddrSet() {
		fmt.Fprintf(os.Stderr, "lock: examples skipped: no Redis at %s (%v); SECKILL_TEST_REDIS_ADDR names one\n", redisAddr, err)
		skip := "^Example"
		if s := flag.Lookup("test.skip").Value.String(); s != "" {
			skip = s + "|" + skip
		}
		if err := flag.Set("test.skip", skip); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

func ping(addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// sharedRedis returns a client of the shared Redis and a key prefix unique to
// the test; the test's keys are deleted when it ends.
func sharedRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("shared Redis at %s: %v (these tests need a real Redis)", redisAddr, err)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	prefix := fmt.Sprintf("locktest:%s:%d:", name, time.Now().UnixNano())
	t.Cleanup(func() { deleteKeys(t, prefix) })
	return rdb, prefix
}

// newShared returns another, independent client of the shared Redis, as a
// separate process would have.
func newShared(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func deleteKeys(t testing.TB, prefix string) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var cursor uint64
	for range 10_000 { // bounded: a test creates a handful of keys
		keys, next, err := rdb.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			t.Logf("cleanup of %s*: %v", prefix, err)
			return
		}
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// redisServer is a redis-server of the test's own, without persistence, on a
// free loopback port, so the test may stop, restart or flush it.
type redisServer struct {
	*locktest.RedisProc
	t testing.TB
}

func startRedis(t testing.TB) *redisServer { return &redisServer{locktest.StartRedisT(t), t} }

func (s *redisServer) addr() string { return s.Addr }

// client returns a go-redis client of s, closed when the test ends.
func (s *redisServer) client() *redis.Client { return s.Client(s.t) }

// stop kills redis-server (SIGKILL, like a crash) and waits for it to exit.
func (s *redisServer) stop() { s.Kill() }

// start starts a stopped server again, empty (no persistence).
func (s *redisServer) start() {
	s.t.Helper()
	if err := s.Restart(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// restart crashes the server and starts it again, empty.
func (s *redisServer) restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// cmdCounter is a go-redis hook counting round trips (a pipeline is one),
// those made for a context marked by counted, and the largest number of
// lock scripts in flight at once.
type cmdCounter struct {
	n        atomic.Int64
	marked   atomic.Int64
	inFlight atomic.Int64
	maxEval  atomic.Int64
}

type countedKey struct{}

// counted marks ctx: the round trips made for it are also counted apart
// (cmdCounter.marked), whatever other goroutines send meanwhile.
func counted(ctx context.Context) context.Context {
	return context.WithValue(ctx, countedKey{}, true)
}

func countCommands(rdb *redis.Client) *cmdCounter {
	c := &cmdCounter{}
	rdb.AddHook(c)
	return c
}

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		if ctx.Value(countedKey{}) != nil {
			c.marked.Add(1)
		}
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			n := c.inFlight.Add(1)
			defer c.inFlight.Add(-1)
			for {
				m := c.maxEval.Load()
				if n <= m || c.maxEval.CompareAndSwap(m, n) {
					break
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// waitAtLeast polls, at most 5s, until n round trips were counted.
func (c *cmdCounter) waitAtLeast(t testing.TB, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.n.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("round trips = %d after 5s; want >= %d", c.n.Load(), n)
		}
		time.Sleep(time.Millisecond) // bounded poll
	}
}

// recorder is an Observer that keeps what it saw.
type recorder struct {
	mu       sync.Mutex
	obtained []error
	attempts []int
	depth    map[string]int
	refresh  []error
	lost     []string
	changed  chan struct{} // receives (without blocking) on every event
}

func newRecorder() *recorder {
	return &recorder{depth: map[string]int{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) Obtained(key string, attempts int, wait time.Duration, err error) {
	r.mu.Lock()
	r.obtained = append(r.obtained, err)
	r.attempts = append(r.attempts, attempts)
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) QueueDepth(key string, depth int) {
	r.mu.Lock()
	r.depth[key] = depth
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) Refreshed(key string, err error) {
	r.mu.Lock()
	r.refresh = append(r.refresh, err)
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) LeaseLost(key string) {
	r.mu.Lock()
	r.lost = append(r.lost, key)
	r.mu.Unlock()
	r.notify()
}

// waitDepth waits, at most 5s, until key's queue depth is want.
func (r *recorder) waitDepth(t testing.TB, key string, want int) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		got := r.depth[key]
		r.mu.Unlock()
		if got == want {
			return
		}
		select {
		case <-r.changed:
		case <-timeout:
			t.Fatalf("queue depth of %q = %d; want %d", key, got, want)
		}
	}
}

// waitRenewals waits, at most timeout, until n renewals were reported.
func (r *recorder) waitRenewals(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		got := len(r.refresh)
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("renewals = %d after %v; want %d", got, timeout, n)
		}
	}
}
