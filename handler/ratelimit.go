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
	MaxKeys      int // keys tracked per limiter; beyond it a new key takes the slot of one not asked again lately
}

// limiter holds one token bucket per key. Keys come from clients, so the
// table holds at most max of them: past it a new key takes the slot of
// one not used lately (CLOCK, the second chance: a hand sweeps the slots,
// clearing each one's use bit and taking the first found clear; a key
// used again before the hand comes back keeps its slot). A flood of new
// keys forgets idle buckets (most of them full again, so nothing is
// lost), and keys seen once before keys seen twice, but never the bucket
// of a key still in use, as clearing the whole table would.
//
// A bucket is one number, its theoretical arrival time (GCRA): the
// moment it is full again. A request is allowed while that moment is at
// most (burst-1) intervals away, and moves it one interval on; this is
// the token bucket of golang.org/x/time/rate, without its own mutex and
// its two allocations per key, which a sale's stream of new buyers paid
// on every order (docs/performance.md).
//
// The table holds no pointer: a key is kept as its maphash under the
// limiter's random seed, and the buckets are slots of one slice. The
// collector never scans it, a new key allocates nothing once it is full,
// and a request touches its own slot alone (a list in order of use
// touched three others, each a cache miss in a table of 100,000). Two
// keys of one hash would share a bucket: a chance of about n²/2⁶⁵ among
// n keys (3 × 10⁻¹⁰ at 100,000), which a client cannot aim at without
// the seed.
type limiter struct {
	mu    sync.Mutex
	seed  maphash.Seed
	index map[uint64]int // a key's hash → its slot
	slots []slot
	hand  int // the next slot the sweep looks at
	epoch time.Time
	// interval is 1/rate in seconds, at most maxInterval; tolerance is
	// (burst-1) intervals: how far ahead a bucket's time may be.
	interval, tolerance float64
	max                 int
}

// maxInterval bounds 1/rate (about 31,700 years), so that no rate a
// setting accepts makes the arithmetic infinite.
const maxInterval = 1e12

// slot is one key's bucket.
type slot struct {
	hash uint64
	tat  float64 // seconds since epoch at which the bucket is full again
	used bool    // asked again since the slot was taken or the hand passed it
}

func newLimiter(perSecond float64, burst, max int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	interval := min(1/perSecond, maxInterval)
	return &limiter{seed: maphash.MakeSeed(), index: map[uint64]int{}, epoch: time.Now(),
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
		l.slots[i].used = true
	case len(l.slots) < l.max:
		i = len(l.slots)
		l.slots = append(l.slots, slot{hash: h, tat: now})
		l.index[h] = i
	default:
		i = l.sweep()
		delete(l.index, l.slots[i].hash)
		l.slots[i] = slot{hash: h, tat: now}
		l.index[h] = i
	}
	b := &l.slots[i]
	tat := max(b.tat, now)
	if tat-now > l.tolerance {
		return false
	}
	b.tat = tat + l.interval
	return true
}

// sweep moves the hand to the first slot not used since it last passed,
// clearing the use bits it passes, and returns that slot: within one turn
// of the table, after which every bit is clear.
func (l *limiter) sweep() int {
	for range len(l.slots) + 1 {
		i := l.hand
		l.hand = (l.hand + 1) % len(l.slots)
		if !l.slots[i].used {
			return i
		}
		l.slots[i].used = false
	}
	panic("unreachable: a turn of the hand clears every slot")
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
