package engine

import "time"

// A SKU worker that takes a small batch while orders for its SKU keep
// arriving waits up to Config.Linger for more, so that a moderately
// busy SKU does not pay a whole transaction per order. It lingers only when
// the wait should at least double the batch: idle, stopped and saturated
// SKUs commit at once.

// gapWeight is the weight 1/gapWeight of each new gap in the mean gap.
const gapWeight = 8

// arrivals estimates how often orders arrive for one SKU: an
// exponentially weighted mean of the gaps between arrivals. Guarded by
// queues.mu, as the queue it belongs to.
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
// batch holds are expected within that time, and nobody else waits for
// the SKU's lock (lim, fair.go: arrivals from now on could not join).
// Shutdown ends the wait at once.
func (w *worker) linger(batch []*pending, lim turnLimit) []*pending {
	cfg, qs := &w.s.cfg, w.s.queues
	if cfg.Linger <= 0 || len(batch) >= cfg.BatchMax || lim.until != noLimit {
		return batch
	}
	if qs.expected(w.q, cfg.Linger) <= int64(len(batch)) {
		return batch
	}
	w.wait.Reset(cfg.Linger)
	select {
	case <-w.wait.C:
	case <-qs.quit:
		w.wait.Stop()
		return batch
	}
	return qs.take(w.q, batch, lim)
}
