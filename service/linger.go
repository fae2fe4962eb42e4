package service

import "time"

// A SKU worker that takes a small batch while orders for its SKU are
// known to be arriving waits a little (OrdersConfig.Linger at most) for
// the next ones before it commits: at a moderate rate (2,000 orders/s on
// one SKU) a batch would otherwise hold about one order, and every order
// pay a whole transaction (the lock, the round trips, the COMMIT) by
// itself. The worker lingers only when the wait is expected to at least
// double its batch: an idle SKU, one whose arrivals stopped, and a
// saturated one (whose batches formed during the last commit are already
// larger than a linger would add) commit at once.

// gapWeight is the weight 1/gapWeight of each new gap in the mean gap.
const gapWeight = 8

// arrivals estimates how often orders arrive for one SKU: an
// exponentially weighted mean of the gaps between arrivals. Guarded by
// Orders.mu, as the queue it belongs to.
type arrivals struct {
	last int64 // unix nanos of the latest arrival; 0 before the first
	gap  int64 // mean gap in nanos; 0 until two have arrived
}

// observe records an arrival at now (unix nanos).
func (a *arrivals) observe(now int64) {
	if a.last != 0 {
		g := max(now-a.last, 0)
		if a.gap == 0 {
			a.gap = g
		} else {
			a.gap += (g - a.gap) / gapWeight
		}
	}
	a.last = now
}

// expectedWithin is how many arrivals are expected within d of now: none
// unless the stream is still flowing (its latest arrival at most two mean
// gaps old).
func (a arrivals) expectedWithin(now int64, d time.Duration) int64 {
	if a.gap <= 0 || now-a.last > 2*a.gap {
		return 0
	}
	return int64(d) / a.gap
}

// linger returns batch with the requests that arrived while the worker
// waited for them: once, for Linger, and only when more orders than the
// batch holds are expected within that time. Shutdown ends the wait at
// once. t is the worker's own stopped timer.
func (o *Orders) linger(q *skuQueue, batch []*pending, t *time.Timer) []*pending {
	if o.cfg.Linger <= 0 || len(batch) >= o.cfg.BatchMax {
		return batch
	}
	if o.expected(q, o.cfg.Linger) <= int64(len(batch)) {
		return batch
	}
	t.Reset(o.cfg.Linger)
	select {
	case <-t.C:
	case <-o.quit:
		t.Stop()
		return batch
	}
	return o.take(q, batch)
}

func (o *Orders) expected(q *skuQueue, d time.Duration) int64 {
	now := time.Now().UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	return q.arrivals.expectedWithin(now, d)
}
