package handler

import (
	"hash/maphash"
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
//
// The table holds no pointer: a key is kept as its maphash under the
// limiter's random seed, and the buckets are slots of one slice, linked
// by index in order of use. The collector never scans it, and a new key
// allocates nothing once the table is full (a sale's buyers are new
// keys, and a table of 100,000 keys, each a string and a bucket, was
// marked at every cycle). Two keys of one hash would share a bucket: a
// chance of about n²/2⁶⁵ among n keys (3 × 10⁻¹⁰ at 100,000), which a
// client cannot aim at without the seed.
type limiter struct {
	mu    sync.Mutex
	seed  maphash.Seed
	index map[uint64]int // a key's hash → its slot
	// slots[0] is the use list's sentinel: slots[0].next is the most
	// recently used; a bucket's slot never moves.
	slots []slot
	epoch time.Time
	// interval is 1/rate in seconds, at most maxInterval; tolerance is
	// (burst-1) intervals: how far ahead a bucket's time may be.
	interval, tolerance float64
	max                 int
}

// maxInterval bounds 1/rate (about 31,700 years), so that no rate a
// setting accepts makes the arithmetic infinite.
const maxInterval = 1e12

// slot is one key's bucket and its place in the use list.
type slot struct {
	hash       uint64
	tat        float64 // seconds since epoch at which the bucket is full again
	prev, next int     // slots' indexes
}

func newLimiter(perSecond float64, burst, max int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	interval := min(1/perSecond, maxInterval)
	return &limiter{seed: maphash.MakeSeed(), index: map[uint64]int{}, slots: []slot{{}}, epoch: time.Now(),
		interval: interval, tolerance: float64(max1(burst)-1) * interval, max: max1(max)}
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
	h := maphash.String(l.seed, key)
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.index[h]
	switch {
	case ok:
		l.unlink(i)
	case len(l.index) >= l.max: // the least recently used slot is the new key's
		i = l.slots[0].prev
		l.unlink(i)
		delete(l.index, l.slots[i].hash)
		l.slots[i] = slot{hash: h, tat: now}
		l.index[h] = i
	default:
		i = len(l.slots)
		l.slots = append(l.slots, slot{hash: h, tat: now})
		l.index[h] = i
	}
	b := &l.slots[i]
	b.prev, b.next = 0, l.slots[0].next // to the front
	l.slots[b.next].prev, l.slots[0].next = i, i
	tat := max(b.tat, now)
	if tat-now > l.tolerance {
		return false
	}
	b.tat = tat + l.interval
	return true
}

// unlink takes slot i out of the use list.
func (l *limiter) unlink(i int) {
	p, n := l.slots[i].prev, l.slots[i].next
	l.slots[p].next, l.slots[n].prev = n, p
}

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
