package service

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

// awaitRig is a worker's view of one SKU queue with a flowing stream of
// arrivals (or a stopped one), without Redis or a database.
func awaitRig(linger time.Duration, flowing bool) (*Orders, *skuQueue) {
	o := NewOrders(nil, nil, nil, OrdersConfig{Linger: linger, QueueMax: 10, MaxLiveSKUs: 10, BatchMax: 10}, nil, nil)
	q := &skuQueue{id: 1, wake: make(chan struct{}, 1)}
	o.queues[q.id] = q
	now := time.Now().UnixNano()
	start := now - int64(50*time.Millisecond)
	if !flowing {
		start -= int64(time.Hour)
	}
	for i := range 50 { // 1,000/s for 50ms, ending now (or an hour ago)
		q.arrivals.observe(start + int64(i)*int64(time.Millisecond))
	}
	return o, q
}

// TestAwaitNext: after a commit that emptied the queue, the worker keeps
// its lock for an order that arrives within the linger, lets it go when
// none does, and does not wait at all when no order is expected.
func TestAwaitNext(t *testing.T) {
	t.Parallel()
	timer := func() *time.Timer { tm := time.NewTimer(time.Hour); tm.Stop(); return tm }

	t.Run("an order arrives", func(t *testing.T) {
		t.Parallel()
		o, q := awaitRig(time.Hour, true) // only the arrival ends the wait
		go func() {
			if err := o.enqueue(&pending{req: OrderRequest{SKUID: q.id}, done: make(chan Outcome, 1)}); err != nil {
				t.Error(err)
			}
		}()
		if !o.awaitNext(q, timer()) {
			t.Fatal("awaitNext = false with an order queued; want true")
		}
		if batch := o.take(q, nil); len(batch) != 1 {
			t.Errorf("the worker then takes %d orders; want the 1 that arrived", len(batch))
		}
		select {
		case <-q.wake: // the loop's next take is woken
		default:
			t.Error("the wake was consumed: the worker's loop would not see the order")
		}
	})
	t.Run("none arrives", func(t *testing.T) {
		t.Parallel()
		o, q := awaitRig(20*time.Millisecond, true)
		if o.awaitNext(q, timer()) {
			t.Fatal("awaitNext = true with nothing queued; want false")
		}
	})
	t.Run("stream stopped: no wait", func(t *testing.T) {
		t.Parallel()
		o, q := awaitRig(time.Hour, false) // a wait would last the hour
		done := make(chan bool, 1)
		go func() { done <- o.awaitNext(q, timer()) }()
		select {
		case got := <-done:
			if got {
				t.Error("awaitNext = true; want false")
			}
		case <-time.After(time.Minute):
			t.Fatal("awaitNext waited although no order was expected")
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		t.Parallel()
		o, q := awaitRig(time.Hour, true)
		close(o.quit)
		if o.awaitNext(q, timer()) {
			t.Error("awaitNext = true after Shutdown; want false")
		}
	})
}
