package service

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// work is the one worker of a SKU in this process. It exits when its queue
// stayed empty for IdleTimeout, or at once when Shutdown finds it empty.
func (o *Orders) work(q *skuQueue) {
	defer o.workers.Done()
	hold := &leaseHold{o: o, sku: q.id, max: o.cfg.LockHold}
	defer hold.release()
	idle := time.NewTimer(o.cfg.IdleTimeout)
	defer idle.Stop()
	lingering := time.NewTimer(time.Hour)
	lingering.Stop()
	batch := make([]*pending, 0, min(o.cfg.BatchMax, 64))
	for {
		lim := o.turn(q, hold)
		batch = o.take(q, batch[:0], lim) // queued work first, also while shutting down
		if len(batch) == 0 && lim.until != noLimit && !o.queueEmpty(q) {
			hold.release() // an older buyer waits on another instance, or comes back later: its turn
			o.awaitLine(q, lingering)
			continue
		}
		if len(batch) == 0 {
			select {
			case <-q.wake:
				continue
			case <-idle.C:
			case <-o.quit:
			case <-q.stop: // evicted: out of the table, nothing queued
				return
			}
			if o.retire(q) {
				return
			}
			idle.Reset(o.cfg.IdleTimeout)
			continue
		}
		batch = o.linger(q, batch, lim, lingering)
		hold.taken += len(batch)
		q.sold = o.commit(context.Background(), q, batch, hold)
		if !o.awaitHolding(q, hold, lingering) {
			hold.release() // idle: the lock is for whoever needs it next
		}
		clear(batch)
		idle.Reset(o.cfg.IdleTimeout)
	}
}

// awaitHolding reports whether q has orders for the worker, waiting up to
// LockHoldIdle for the next one while it holds its lease, so that a
// moderately busy SKU keeps its lease, fence and known row between
// batches. The queue is idle meanwhile, so a full table may evict it.
// Someone else wanting the lease, eviction, Shutdown and a lost lease end
// the wait; a lease that cannot say it is wanted is kept past each
// LockHold only if Keep finds nobody waiting.
func (o *Orders) awaitHolding(q *skuQueue, hold *leaseHold, t *time.Timer) bool {
	if !o.idleIfEmpty(q) {
		return true
	}
	if hold.lease == nil || o.cfg.LockHoldIdle <= 0 || hold.max <= 0 { // max 0: one hold per batch
		return false
	}
	wanting := hold.wanting()
	deadline := time.Now().Add(o.cfg.LockHoldIdle)
	defer t.Stop()
	for {
		wait := time.Until(deadline)
		if wanting == nil {
			wait = min(wait, hold.max-time.Since(hold.since))
		}
		if wait <= 0 {
			if time.Until(deadline) <= 0 || !hold.keep() {
				return false
			}
			continue
		}
		t.Reset(wait)
		select {
		case <-q.wake: // may be left by orders this worker already took
			if !o.queueEmpty(q) {
				return true
			}
		case <-t.C:
		case <-wanting: // nil (never ready) when the lease cannot say
			return false
		case <-o.quit:
			return false
		case <-q.stop: // evicted while it waited: a full table needed its slot
			return false
		case <-hold.lease.Lost():
			return false
		}
	}
}

// commit answers every request of batch (all for one SKU), in the steps
// of the order path: admit the buyers still waiting, refuse them all
// when the answer needs no transaction, commit under the SKU's lock,
// answer, and publish a sell-out. It reports whether the batch created
// an order.
func (o *Orders) commit(parent context.Context, q *skuQueue, batch []*pending, hold *leaseHold) (sold bool) {
	skuID := q.id
	live := o.admit(batch)
	if len(live) == 0 || o.refuseAll(skuID, live) {
		return false
	}
	ctx, cancel := context.WithTimeout(parent, o.cfg.TxTimeout)
	defer cancel()
	begun := time.Now().UnixNano()
	res, err := o.commitLocked(ctx, o.batchOf(skuID, live), hold)
	if err != nil {
		o.fail(skuID, live, err)
		return false
	}
	for _, out := range res.Outcomes {
		sold = sold || out.Placed.Created
	}
	if o.cfg.Replicas != nil {
		o.confirmThenAnswer(q, live, res, begun)
	} else {
		o.answer(skuID, live, res, begun)
	}
	return sold
}

// admit takes the requests whose buyers still wait and are within their
// deadline; the late are answered, uncharged.
func (o *Orders) admit(batch []*pending) []*pending {
	live := batch[:0:0]
	now := time.Now().UnixNano()
	for _, p := range batch {
		if p.state.Load() != taken && !p.state.CompareAndSwap(queued, taken) {
			continue // its buyer left
		}
		if p.expires != 0 && now > p.expires {
			p.done <- Outcome{Err: fmt.Errorf("%w: waited past order.request_timeout", ErrUnavailable)}
			continue
		}
		live = append(live, p)
	}
	return live
}

// refuseAll answers the whole batch without a transaction when Shutdown
// ran out of time, or when the SKU is known sold out and no buyer may be
// a replay of an earlier order.
func (o *Orders) refuseAll(skuID int64, live []*pending) bool {
	var err error
	switch {
	case o.abort.Load():
		err = fmt.Errorf("%w: shutting down", ErrUnavailable)
	case o.localSoldOut(skuID) && !anyKeyed(live):
		err = ErrSoldOut
	default:
		return false
	}
	for _, p := range live {
		if err == ErrSoldOut {
			o.obs.SoldOutFastPath()
		}
		p.done <- Outcome{Err: err}
	}
	return true
}

func (o *Orders) batchOf(skuID int64, live []*pending) Batch {
	b := Batch{SKUID: skuID, Requests: make([]OrderRequest, len(live)), PaymentTimeout: o.cfg.PaymentTimeout}
	for i, p := range live {
		b.Requests[i] = p.req
	}
	return b
}

// maxStaleFences bounds how often one batch re-obtains the lock after
// the database refused its fence.
const maxStaleFences = 3

// commitLocked commits b under the SKU's lock when one can be had. A
// stale fence means another holder took the lock since ours was
// obtained: the lease is dropped at once, never used again, and a new one
// obtained after a jittered pause, a bounded number of times.
func (o *Orders) commitLocked(ctx context.Context, b Batch, hold *leaseHold) (BatchResult, error) {
	for stale := 0; ; stale++ {
		lease := hold.acquire(ctx)
		b.Known, b.KnownOn = hold.known, hold.knownOn
		res, err := o.commitUnder(ctx, b, lease)
		if lease != nil {
			switch adopted, aerr := o.adoptForeignFence(ctx, lease, err); {
			case aerr != nil:
				o.log.Warn("stale fence not checked against the lock backend; the batch fails", "sku", b.SKUID, "err", aerr)
				err = aerr // not ErrStaleFence: nothing says the lock moved
			case adopted:
				res, err = o.commitUnder(ctx, b, lease)
			}
		}
		if err != nil {
			// A lease that failed a batch (lost, stale, expired) never
			// serves another: the next attempt obtains afresh.
			hold.release()
		} else if lease != nil {
			hold.known, hold.knownOn = &res.SKU, res.Commit.Server
		}
		if !errors.Is(err, ErrStaleFence) {
			return res, err
		}
		if stale+1 >= maxStaleFences || ctx.Err() != nil {
			return res, fmt.Errorf("%w: the sku's lock kept moving to other holders: %w", ErrUnavailable, err)
		}
		o.log.Warn("stale fence: the lock moved to another holder; obtaining it again", "sku", b.SKUID, "fence", b.Fence)
		backoff(ctx, stale+2)
	}
}

// commitUnder runs b's transaction with lease's fence (none without a
// lease), retrying version conflicts a bounded number of times. Losing
// the lease meanwhile cancels the transaction.
func (o *Orders) commitUnder(ctx context.Context, b Batch, lease Lease) (BatchResult, error) {
	b.Fence = 0
	// A batch sold without the lock commits in a transaction of its own:
	// it is the one likely to meet another instance's holder on its row (a
	// row-lock wait, a version conflict), which in a shared round would
	// hold up or fail the other SKUs' batches with it.
	commit := o.store.CommitBatch
	if lease != nil {
		commit = o.group.commit
		b.Fence = lease.Fence()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := o.cancelOnLoss(lease, b.SKUID, cancel)
		defer stop()
	}
	start := time.Now()
	var (
		res     BatchResult
		err     error
		retries int
	)
	for {
		b.Now = time.Now().UTC().Truncate(time.Microsecond) // what the database keeps
		res, err = commit(ctx, b)
		if !errors.Is(err, ErrConflict) || retries >= o.cfg.MaxRetries || ctx.Err() != nil {
			break
		}
		retries++
		b.Known = nil // the row moved: read it
		if lease == nil {
			backoff(ctx, retries) // unlocked contenders: spread the retries out
		}
	}
	o.obs.Batch(len(b.Requests), time.Since(start), retries, err)
	if err == nil && b.Known != nil {
		o.obs.KnownRow(res.ReadsSkipped)
	}
	return res, err
}

// cancelOnLoss calls cancel if lease is found lost before stop is called.
func (o *Orders) cancelOnLoss(lease Lease, skuID int64, cancel context.CancelFunc) (stop func()) {
	lost := lease.Lost()
	if lost == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-lost:
			o.log.Warn("lock lease lost during a batch; aborting it", "sku", skuID)
			cancel()
		case <-done:
		}
	}()
	return func() { close(done) }
}

// fail answers every buyer of a failed batch with a true answer: the
// batch committed nothing (or, for ErrOutcomeUnknown, nobody knows).
func (o *Orders) fail(skuID int64, live []*pending, err error) {
	switch {
	case errors.Is(err, ErrSKUNotFound):
		o.skus.forget(skuID) // the database no longer has it
	case errors.Is(err, ErrConflict):
		err = fmt.Errorf("%w: too much contention on sku %d: %w", ErrUnavailable, skuID, err)
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrOutcomeUnknown):
	default:
		o.log.Error("order batch failed", "sku", skuID, "size", len(live), "err", err)
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for _, p := range live {
		p.done <- Outcome{Err: err}
	}
}

func anyKeyed(ps []*pending) bool {
	for _, p := range ps {
		if p.req.IdempotencyKey != "" {
			return true
		}
	}
	return false
}

// backoff waits a jittered, exponentially growing pause, or until ctx ends.
func backoff(ctx context.Context, attempt int) {
	ceiling := time.Millisecond << min(attempt, 6)
	t := time.NewTimer(rand.N(ceiling) + 100*time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
