package handler

import (
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
	MaxKeys      int // keys tracked per limiter before the table is reset
}

// limiter holds one token bucket per key. Keys come from clients, so the
// table is reset when it reaches max rather than allowed to grow: a reset
// only forgives, it never refuses anyone.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	rate    rate.Limit
	burst   int
	max     int
}

func newLimiter(perSecond float64, burst, max int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	return &limiter{buckets: map[string]*rate.Limiter{}, rate: rate.Limit(perSecond), burst: max1(burst), max: max1(max)}
}

func max1(n int) int { return max(n, 1) }

// allow reports whether key may go on now; a nil limiter allows everything.
func (l *limiter) allow(key string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			clear(l.buckets)
		}
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	l.mu.Unlock()
	return b.Allow()
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
