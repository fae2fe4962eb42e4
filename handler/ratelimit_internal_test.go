package handler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestLimiter_NewKeysPastTheCapDoNotResetABusyKey(t *testing.T) {
	t.Parallel()
	const keys = 100
	l := newLimiter(0.001, 3, keys) // no refill within the test
	for i := range 3 {
		if !l.allow("heavy") {
			t.Fatalf("heavy request %d refused within its burst", i)
		}
	}
	// Rotating ids, ten times the table, while the heavy user keeps trying.
	for i := range 10 * keys {
		if !l.allow(fmt.Sprintf("rotating-%d", i)) {
			t.Fatalf("rotating id %d refused: a new key has a full bucket", i)
		}
		if i%(keys/4) == 0 && l.allow("heavy") {
			t.Fatalf("after %d rotating ids the heavy user was allowed again: its bucket was reset", i+1)
		}
		if n := len(l.index); n > keys {
			t.Fatalf("%d buckets after %d rotating ids; want at most %d", n, i+1, keys)
		}
	}
	if n := l.listed(); n != len(l.index) {
		t.Errorf("%d buckets listed by use, %d in the table", n, len(l.index))
	}
}

// A key asked again keeps its slot; the hand takes one asked only once.
func TestLimiter_EvictsAKeyNotAskedAgain(t *testing.T) {
	t.Parallel()
	l := newLimiter(0.001, 1, 3)
	for _, k := range []string{"a", "b", "c"} {
		l.allow(k) // each bucket now empty
	}
	l.allow("a") // a asked again; b and c only once
	l.allow("d") // evicts b, the first past the hand not asked again
	for _, tt := range []struct {
		key  string
		want bool
	}{{"b", true}, {"a", false}, {"d", false}} {
		if got := l.allow(tt.key); got != tt.want {
			t.Errorf("allow(%q) = %v; want %v", tt.key, got, tt.want)
		}
	}
}

// listed counts the buckets in the table, checking that the index and
// the slots agree.
func (l *limiter) listed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, sl := range l.slots {
		if j, ok := l.index[sl.hash]; !ok || j != i {
			return -1
		}
	}
	if len(l.index) != len(l.slots) {
		return -1
	}
	return len(l.slots)
}

// The limiter answers as golang.org/x/time/rate's token bucket of the same
// rate and burst, request by request, at nanosecond times (the clock both
// read); the rates past what a nanosecond clock resolves are the next test's.
func TestLimiter_AnswersAsTheTokenBucket(t *testing.T) {
	t.Parallel()
	epoch := time.Unix(1_700_000_000, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range []struct {
		rate  float64
		burst int
	}{{20, 40}, {1, 1}, {0.001, 3}, {1000, 1}, {1e6, 7}, {0.01, 2}, {5, math.MaxInt32}} {
		l := newLimiter(tt.rate, tt.burst, 10)
		ref := map[string]*rate.Limiter{}
		now := 0.0
		for i := range 5000 {
			now += rng.ExpFloat64() / (2 * tt.rate) // arrivals about twice the rate
			now = math.Round(min(now, 1e9)*1e9) / 1e9
			key := fmt.Sprintf("k%d", rng.IntN(3))
			r := ref[key]
			if r == nil {
				r = rate.NewLimiter(rate.Limit(tt.rate), tt.burst)
				r.AllowN(epoch, 0) // start the bucket full at the epoch, as the limiter does
				ref[key] = r
			}
			at := epoch.Add(time.Duration(now * 1e9))
			if got, want := l.allowAt(key, now), r.AllowN(at, 1); got != want {
				t.Fatalf("rate %g burst %d, request %d of %s at %.6fs: allow = %v; the token bucket says %v", tt.rate, tt.burst, i, key, now, got, want)
			}
		}
	}
}

// The ends of the accepted range stay finite: a rate of 1e300/s allows a
// request every nanosecond, one of 1e-300/s only its burst for 31,700
// years (maxInterval).
func TestLimiter_ExtremeRates(t *testing.T) {
	t.Parallel()
	fast := newLimiter(1e300, 1, 10)
	for i := range 1000 {
		if !fast.allowAt("k", float64(i)*1e-9) {
			t.Fatalf("rate 1e300: request %d, a nanosecond after the last, refused", i)
		}
	}
	slow := newLimiter(1e-300, 2, 10)
	for i, now := range []float64{0, 1, 1e9, 1e11} {
		if got, want := slow.allowAt("k", now), i < 2; got != want {
			t.Fatalf("rate 1e-300 burst 2: request %d at %gs: allow = %v; want %v", i, now, got, want)
		}
	}
}
