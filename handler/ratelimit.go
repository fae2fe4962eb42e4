package handler

import (
	"container/list"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
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
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket
	byUse   *list.List               // front: the most recently used
	rate    rate.Limit
	burst   int
	max     int
}

type bucket struct {
	key    string
	tokens *rate.Limiter
}

func newLimiter(perSecond float64, burst, max int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	return &limiter{buckets: map[string]*list.Element{}, byUse: list.New(),
		rate: rate.Limit(perSecond), burst: max1(burst), max: max1(max)}
}

func max1(n int) int { return max(n, 1) }

// allow reports whether key may go on now; a nil limiter allows everything.
func (l *limiter) allow(key string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	e, ok := l.buckets[key]
	if ok {
		l.byUse.MoveToFront(e)
	} else {
		if len(l.buckets) >= l.max {
			delete(l.buckets, l.byUse.Remove(l.byUse.Back()).(*bucket).key)
		}
		e = l.byUse.PushFront(&bucket{key: key, tokens: rate.NewLimiter(l.rate, l.burst)})
		l.buckets[key] = e
	}
	b := e.Value.(*bucket)
	l.mu.Unlock()
	return b.tokens.Allow()
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
