package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/service"
)

// worker is the one worker of a SKU in this process: it takes the SKU's
// buyers in batches, in arrival order, and has each batch committed under
// the SKU's lock and answered.
type worker struct {
	s    *Seller
	q    *skuQueue
	hold leaseHold
	// wait is the worker's own timer, stopped between its waits (a
	// linger, a held lease, a buyer sent back).
	wait *time.Timer
}

// work runs q's worker. It exits when its queue stayed empty for
// IdleTimeout, or at once when Shutdown finds it empty.
func (s *Seller) work(q *skuQueue) {
	defer s.queues.workers.Done()
	w := &worker{s: s, q: q, hold: leaseHold{locks: s.locks, sku: q.id, max: s.cfg.LockHold}, wait: time.NewTimer(time.Hour)}
	w.wait.Stop()
	defer w.hold.release()
	idle := time.NewTimer(s.cfg.IdleTimeout)
	defer idle.Stop()
	batch := make([]*pending, 0, min(s.cfg.BatchMax, 64))
	for {
		lim := w.turn()
		batch = s.queues.take(q, batch[:0], lim) // queued work first, also while shutting down
		if len(batch) == 0 && lim.until != noLimit && !s.queues.empty(q) {
			w.hold.release() // an older buyer waits on another instance, or comes back later: its turn
			w.awaitLine()
			continue
		}
		if len(batch) == 0 {
			select {
			case <-q.wake:
				continue
			case <-idle.C:
			case <-s.queues.quit:
			case <-q.stop: // evicted: out of the table, nothing queued
				return
			}
			if s.queues.retire(q) {
				return
			}
			idle.Reset(s.cfg.IdleTimeout)
			continue
		}
		batch = w.linger(batch, lim)
		w.hold.taken += len(batch)
		q.sold = w.commit(batch)
		if !w.awaitHolding() {
			w.hold.release() // idle: the lock is for whoever needs it next
		}
		clear(batch)
		idle.Reset(s.cfg.IdleTimeout)
	}
}

// awaitHolding reports whether the queue has orders for the worker,
// waiting up to LockHoldIdle for the next one while it holds its lease, so
// that a moderately busy SKU keeps its lease, fence and known row between
// batches. The queue is idle meanwhile, so a full table may evict it. A
// lease that cannot say it is wanted is kept past each LockHold only if
// Keep finds nobody waiting.
func (w *worker) awaitHolding() bool {
	h := &w.hold
	if !w.s.queues.idleIfEmpty(w.q) {
		return true
	}
	if h.lease == nil || w.s.cfg.LockHoldIdle <= 0 || h.max <= 0 { // max 0: one hold per batch
		return false
	}
	wanting := h.lease.Wanting()
	deadline := time.Now().Add(w.s.cfg.LockHoldIdle)
	defer w.wait.Stop()
	for {
		wait := time.Until(deadline)
		if wanting == nil {
			wait = min(wait, h.max-time.Since(h.since))
		}
		if wait <= 0 {
			if time.Until(deadline) <= 0 || !h.keep() {
				return false
			}
			continue
		}
		if more, ended := w.holdFor(wait, wanting); more || ended {
			return more
		}
	}
}

// holdFor waits up to d with the lease held and nothing queued. It
// reports whether orders came (more), or whether the hold ends: someone
// else wants the lease (wanting, nil when the lease cannot say), the
// queue was evicted, Shutdown, or the lease was lost.
func (w *worker) holdFor(d time.Duration, wanting <-chan struct{}) (more, ended bool) {
	w.wait.Reset(d)
	select {
	case <-w.q.wake: // may be left by orders this worker already took
		return !w.s.queues.empty(w.q), false
	case <-w.wait.C:
		return false, false
	case <-wanting:
	case <-w.s.queues.quit:
	case <-w.q.stop: // evicted while it waited: a full table needed its slot
	case <-w.hold.lease.Lost():
	}
	return false, true
}

// commit answers every request of batch, in the steps of the order path:
// admit the buyers still waiting, refuse them all when the answer needs
// no transaction, commit under the SKU's lock (commit.go), answer, and
// publish a sell-out. It reports whether the batch created an order.
func (w *worker) commit(batch []*pending) (sold bool) {
	live := admit(batch)
	if len(live) == 0 || w.refuseAll(live) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.s.cfg.TxTimeout)
	defer cancel()
	begun := time.Now().UnixNano()
	b := service.Batch{SKUID: w.q.id, Requests: make([]service.OrderRequest, len(live)), PaymentTimeout: w.s.cfg.PaymentTimeout}
	for i, p := range live {
		b.Requests[i] = p.req
	}
	res, err := w.commitLocked(ctx, b)
	if err != nil {
		w.fail(live, err)
		return false
	}
	for _, out := range res.Outcomes {
		sold = sold || out.Placed.Created
	}
	if w.s.cfg.Replicas != nil {
		w.confirmThenAnswer(live, res, begun)
	} else {
		w.answer(live, res, begun)
	}
	return sold
}

// admit takes the requests whose buyers still wait and are within their
// deadline; the late are answered, uncharged.
func admit(batch []*pending) []*pending {
	live := batch[:0:0]
	now := time.Now().UnixNano()
	for _, p := range batch {
		if p.state.Load() != taken && !p.state.CompareAndSwap(queued, taken) {
			continue // its buyer left
		}
		if p.expires != 0 && now > p.expires {
			p.done <- service.Outcome{Err: fmt.Errorf("%w: waited past order.request_timeout", service.ErrUnavailable)}
			continue
		}
		live = append(live, p)
	}
	return live
}

// refuseAll answers the whole batch without a transaction when Shutdown
// ran out of time, or when the SKU is known sold out and no buyer may be
// a replay of an earlier order.
func (w *worker) refuseAll(live []*pending) bool {
	var err error
	switch {
	case w.s.abort.Load():
		err = fmt.Errorf("%w: shutting down", service.ErrUnavailable)
	case w.s.skus.SoldOut(w.q.id) && !anyKeyed(live):
		err = service.ErrSoldOut
	default:
		return false
	}
	for _, p := range live {
		if err == service.ErrSoldOut {
			w.s.obs.SoldOutFastPath()
		}
		p.done <- service.Outcome{Err: err}
	}
	return true
}

func anyKeyed(ps []*pending) bool {
	for _, p := range ps {
		if p.req.IdempotencyKey != "" {
			return true
		}
	}
	return false
}
