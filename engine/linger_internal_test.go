package engine

import (
	"testing"
	"time"
)

// TestArrivalsExpected: the estimator expects arrivals only while a
// stream flows, as many as its mean gap fits in the window.
func TestArrivalsExpected(t *testing.T) {
	t.Parallel()
	const ms = int64(time.Millisecond)
	steady := func(n int, gap int64) arrivals {
		var a arrivals
		for i := 1; i <= n; i++ {
			a.observe(int64(i) * gap)
		}
		return a
	}
	cases := []struct {
		name string
		a    arrivals
		now  int64
		want int64
	}{
		{"nothing arrived", arrivals{}, 10 * ms, 0},
		{"one arrival: no rate known", steady(1, ms), ms, 0},
		{"2,000/s flowing: 4 in 2ms", steady(50, ms/2), 25 * ms, 4},
		{"500/s flowing: 1 in 2ms", steady(50, 2*ms), 100 * ms, 1},
		{"20/s: none in 2ms", steady(50, 50*ms), 2500 * ms, 0},
		{"stream stopped: none", steady(50, ms/2), 25*ms + 5*ms, 0},
	}
	for _, c := range cases {
		if got := c.a.expectedWithin(c.now, 2*time.Millisecond); got != c.want {
			t.Errorf("%s: expectedWithin(2ms) = %d; want %d (arrivals %+v)", c.name, got, c.want, c.a)
		}
	}
}

// TestArrivalsAfterBurst: a lone order long after a burst is not taken
// for the burst going on.
func TestArrivalsAfterBurst(t *testing.T) {
	t.Parallel()
	var a arrivals
	now := int64(0)
	for range 100 { // a burst at 10,000/s
		now += int64(100 * time.Microsecond)
		a.observe(now)
	}
	now += int64(time.Second)
	a.observe(now)
	if got := a.expectedWithin(now, 2*time.Millisecond); got != 0 {
		t.Errorf("expectedWithin(2ms) after a 1s pause = %d; want 0 (gap %v)", got, time.Duration(a.gap))
	}
}
