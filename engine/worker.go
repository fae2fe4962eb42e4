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
	hold hold
	// soldOut is what the directory said of the SKU when the batch's
	// turn began: the one time the locked road asks (fair.go).
	soldOut bool
	// wait is the worker's own timer, stopped between its waits (a
	// linger, a held lease, a buyer sent back).
	wait *time.Timer
	// lockStep is how the turn readied the lease, for traced orders
	// (readyLease); kept only with a Tracer.
	lockStep Step
}

// work runs q's worker. It exits when its queue stayed empty for
// IdleTimeout, or at once when Shutdown finds it empty.
func (s *Seller) work(q *skuQueue) {
	defer s.queues.workers.Done()
	w := &worker{s: s, q: q, hold: hold{locks: s.locks, sku: q.id, max: s.cfg.LockHold}, wait: time.NewTimer(time.Hour)}
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

// commit answers every request of batch, in the steps of the order path:
// admit the buyers still waiting, refuse them all when the answer needs
// no transaction, commit under the lease its turn decided (hold.go), answer, and
// publish a sell-out. It reports whether the batch created an order.
func (w *worker) commit(batch []*pending) (sold bool) {
	live := admit(batch)
	if len(live) == 0 || w.refuseAll(live) {
		return false
	}
	var bt *batchTrace
	if w.s.cfg.Tracer != nil {
		bt = w.traceBatch(live) // nil when none of them is traced
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.s.cfg.TxTimeout)
	defer cancel()
	begun := time.Now().UnixNano()
	b := service.Batch{SKUID: w.q.id, Requests: make([]service.OrderRequest, len(live)),
		PaymentTimeout: w.s.cfg.PaymentTimeout, WaitlistMax: w.s.cfg.WaitlistMax}
	for i, p := range live {
		b.Requests[i] = p.req
		b.Requests[i].Arrival = p.arrived
	}
	res, err := w.commitHeld(ctx, b, bt)
	if err != nil {
		if bt != nil {
			bt.finish(live, res, time.Now(), err, nil)
		}
		w.fail(live, err)
		return false
	}
	for _, out := range res.Outcomes {
		sold = sold || out.Placed.Created
	}
	if w.s.cfg.Replicas != nil {
		w.confirmThenAnswer(live, res, begun, bt)
	} else {
		if bt != nil {
			bt.finish(live, res, time.Now(), nil, nil)
		}
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
			err := fmt.Errorf("%w: waited past order.request_timeout", service.ErrUnavailable)
			p.refused(err)
			p.done <- service.Outcome{Err: err}
			continue
		}
		if p.trace != nil {
			p.trace.taken = time.Unix(0, now)
		}
		live = append(live, p)
	}
	return live
}

// refuseAll answers the whole batch without a transaction when Shutdown
// ran out of time, or when the SKU is known sold out and no buyer may be
// a replay of an earlier order or asks to wait. Only a batch whose turn found the SKU sold
// out asks again, for the buyers who came since: the locked road leaves
// a sell-out learned meanwhile to its transaction.
func (w *worker) refuseAll(live []*pending) bool {
	var err error
	switch {
	case w.s.abort.Load():
		err = fmt.Errorf("%w: shutting down", service.ErrUnavailable)
	case w.soldOut && w.s.skus.SoldOut(w.q.id) && !anyKeyedOrWaiting(live):
		err = service.ErrSoldOut
	default:
		return false
	}
	for _, p := range live {
		if err == service.ErrSoldOut {
			w.s.obs.SoldOutFastPath()
		}
		p.refused(err)
		p.done <- service.Outcome{Err: err}
	}
	return true
}

// anyKeyedOrWaiting reports whether a buyer of ps needs the database's
// answer though the SKU is sold out: a replay, or one who asks to wait.
func anyKeyedOrWaiting(ps []*pending) bool {
	for _, p := range ps {
		if p.req.IdempotencyKey != "" || p.req.Wait {
			return true
		}
	}
	return false
}
