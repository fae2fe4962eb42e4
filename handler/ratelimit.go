package handler

import (
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// Limits configures the per-key token buckets; a zero rate turns a limit off.
type Limits struct {
	PerUserRate  float64 // order requests per second per user_id
	PerUserBurst int
	PerIPRate    float64 // requests per second per client IP, on /api
	PerIPBurst   int
	MaxKeys      int // keys tracked per limiter; beyond it the least recently used is evicted
}

// limiter holds one token bucket per key. Keys come from clients, so the
// table holds at most max of them and evicts the least recently used: a
// flood of new keys forgets idle buckets (most of them full again, so
// nothing is lost) but never the bucket of a key still in use, as
// clearing the whole table would.
//
// A bucket is one number, its theoretical arrival time (GCRA): the
// moment it is full again. A request is allowed while that moment is at
// most (burst-1) intervals away, and moves it one interval on; this is
// the token bucket of golang.org/x/time/rate, without its own mutex and
// its two allocations per key, which a sale's stream of new buyers paid
// on every order (docs/performance.md).
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	used    bucket // the use list's sentinel: used.next is the most recently used
	epoch   time.Time
	// interval is 1/rate in seconds, at most maxInterval; tolerance is
	// (burst-1) intervals: how far ahead a bucket's time may be.
	interval, tolerance float64
	max                 int
}

// maxInterval bounds 1/rate (about 31,700 years), so that no rate a
// setting accepts makes the arithmetic infinite.
const maxInterval = 1e12

type bucket struct {
	key        string
	tat        float64 // seconds since epoch at which the bucket is full again
	prev, next *bucket
}

func newLimiter(perSecond float64, burst, max int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	interval := min(1/perSecond, maxInterval)
	l := &limiter{buckets: map[string]*bucket{}, epoch: time.Now(),
		interval: interval, tolerance: float64(max1(burst)-1) * interval, max: max1(max)}
	l.used.prev, l.used.next = &l.used, &l.used
	return l
}

func max1(n int) int { return max(n, 1) }

// allow reports whether key may go on now; a nil limiter allows everything.
func (l *limiter) allow(key string) bool {
	if l == nil {
		return true
	}
	return l.allowAt(key, time.Since(l.epoch).Seconds())
}

// allowAt is allow at now seconds since the limiter's epoch.
func (l *limiter) allowAt(key string, now float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.max {
			lru := l.used.prev
			lru.unlink()
			delete(l.buckets, lru.key)
		}
		b = &bucket{key: key, tat: now}
		l.buckets[key] = b
	} else {
		b.unlink()
	}
	b.prev, b.next = &l.used, l.used.next // to the front
	b.next.prev, l.used.next = b, b
	tat := max(b.tat, now)
	if tat-now > l.tolerance {
		return false
	}
	b.tat = tat + l.interval
	return true
}

func (b *bucket) unlink() { b.prev.next, b.next.prev = b.next, b.prev }

// perIP refuses a client IP over its rate with 429 rate_limited.
func perIP(l *limiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !l.allow(c.ClientIP()) {
			rateLimited(c)
			return
		}
		c.Next()
	}
}

func rateLimited(c *gin.Context) {
	c.Header("Retry-After", "1")
	abort(c, http.StatusTooManyRequests, codeRateLimited, "too many requests from this client; retry shortly")
}
