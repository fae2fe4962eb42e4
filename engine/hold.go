package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/backoff"
	"github.com/seckill/seckill/service"
)

// A worker's hold of its SKU's lock, in one place. Per batch the lease is
// decided once, in the turn (fair.go): the one held is kept unless it was
// lost or, under fair selling, its turn is over; otherwise one is obtained,
// ranked by the queue's oldest buyer when the locker ranks, or none when
// the lock policy says to sell on the database's guard (locks.obtain).
// The batch then commits under that lease (commitHeld): a stale fence is
// checked against the backend's horizon (adoptForeignFence) or answered
// by obtaining the lock again. Between batches the worker keeps the lease
// while more orders may come (awaitHolding).

// hold is a SKU's lock held by its worker across batches until someone
// else wants it, saving each batch an obtain and a release. The database
// accepts a repeated fence, and nobody else writes the SKU meanwhile, so
// known lets the next batch skip its reads.
type hold struct {
	locks *locks
	sku   int64
	max   time.Duration
	lease Lease   // nil: the batch sells on the database guard
	hand  Handoff // the lease as a Handoff, nil when it is none
	// wanting is hand's Wanting: closed once someone else waits for the
	// lease; nil when it cannot tell.
	wanting <-chan struct{}
	since   time.Time
	known   *service.SKU // the SKU after this lease's last batch; nil before its first
	// rank is the arrival (unix µs) of the oldest buyer the lock is
	// wanted for, under fair selling (fair.go); 0: obtained unranked.
	rank int64
	// taken counts the buyers taken into batches since the lease was
	// obtained: a turn's floor (fair.go).
	taken int
	// knownOn is the server that committed known (Commit.Server), 0 when
	// not tracked: after a failover the row there is another one.
	knownOn int64
}

// take readies the lease for a batch whose oldest buyer arrived at head:
// one held past LockHold by a holder that cannot hand it over by age is
// kept only if nobody waits, and when none is held one is obtained,
// ranked by head when ranked (nil: the batch sells on the database
// guard). A lease lost meanwhile is found by commitHeld.
func (h *hold) take(head int64, ranked bool) {
	h.rank = 0
	if ranked {
		h.rank = head // also for obtaining again after a stale fence
	}
	if h.lease != nil && h.deaf() && time.Since(h.since) >= h.max && !h.unwanted() {
		h.keep()
	}
	if h.lease == nil {
		h.obtain(context.Background())
	}
}

// obtain takes the lock, ranked when h.rank is set; nil: sell unlocked.
func (h *hold) obtain(ctx context.Context) {
	h.lease = h.locks.obtain(ctx, h.sku, h.rank)
	h.hand, _ = h.lease.(Handoff)
	h.wanting = nil
	if h.hand != nil {
		h.wanting = h.hand.Wanting()
	}
	h.since = time.Now()
	h.known, h.knownOn, h.taken = nil, 0, 0
}

// deaf reports whether the holder cannot hand the lease over by age
// (fair.go): it was obtained unranked, or it does not hear who wants it
// (ZooKeeper, Redlock, wanted notices off). It then lets the lease go,
// when wanted, after each LockHold.
func (h *hold) deaf() bool { return h.rank == 0 || h.wanting == nil }

// unwanted reports whether the lease is known to be wanted by nobody else:
// then the worker holds on past max without a round trip.
func (h *hold) unwanted() bool {
	w := h.wanting
	if w == nil || h.max <= 0 {
		return false
	}
	select {
	case <-w:
		return false
	default:
		return true
	}
}

// keep holds the lease another LockHold if nobody waits for it, else lets
// it go; it reports whether it is still held. Any lease is let go when
// max is 0, and one that cannot hear who waits.
func (h *hold) keep() bool {
	if h.max <= 0 || h.hand == nil {
		h.release()
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	kept, err := h.hand.Keep(ctx)
	if kept {
		h.since = time.Now()
		return true
	}
	if err != nil {
		h.locks.log.Warn("lock release failed", "sku", h.sku, "err", err)
	}
	h.lease, h.hand, h.wanting, h.known = nil, nil, nil, nil // Keep let it go
	return false
}

// release lets the lease go, if one is held.
func (h *hold) release() {
	h.known = nil
	if h.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := h.lease.Release(ctx); err != nil {
		h.locks.log.Warn("lock release failed", "sku", h.sku, "err", err)
	}
	h.lease, h.hand, h.wanting = nil, nil, nil
}

// maxStaleFences bounds how often one batch re-obtains the lock after
// the database refused its fence.
const maxStaleFences = 3

// commitHeld commits b under the lease its turn decided (commitUnder). A
// lease found lost meanwhile, or refused by the database's fence, never
// serves again: a stale fence means another holder took the lock since
// ours was obtained, so a new one is obtained after a jittered pause, a
// bounded number of times.
func (w *worker) commitHeld(ctx context.Context, b service.Batch, bt *batchTrace) (service.BatchResult, error) {
	h := &w.hold
	for stale := 0; ; stale++ {
		if h.lease != nil {
			select {
			case <-h.lease.Lost(): // a nil channel (no watchdog) is never ready
				h.release()
				h.obtain(ctx)
			default:
			}
		}
		lease := h.lease
		b.Known, b.KnownOn = h.known, h.knownOn
		res, err := w.commitUnder(ctx, b, lease, bt)
		if lease != nil && errors.Is(err, service.ErrStaleFence) {
			switch adopted, aerr := w.s.adoptForeignFence(ctx, lease, err); {
			case aerr != nil:
				w.s.log.Warn("stale fence not checked against the lock backend; the batch fails", "sku", b.SKUID, "err", aerr)
				err = aerr // not ErrStaleFence: nothing says the lock moved
			case adopted:
				res, err = w.commitUnder(ctx, b, lease, bt)
			}
		}
		if err != nil {
			h.release() // a lease that failed a batch (lost, stale, expired) serves no other
		} else if lease != nil {
			h.known, h.knownOn = &res.SKU, res.Commit.Server
		}
		if !errors.Is(err, service.ErrStaleFence) {
			return res, err
		}
		if stale+1 >= maxStaleFences || ctx.Err() != nil {
			return res, fmt.Errorf("%w: the sku's lock kept moving to other holders: %w", service.ErrUnavailable, err)
		}
		w.s.log.Warn("stale fence: the lock moved to another holder; obtaining it again", "sku", b.SKUID, "fence", b.Fence)
		backoff.Wait(ctx, stale+2)
		h.obtain(ctx)
	}
}

// adoptForeignFence recovers from a stored fence above anything the
// lease's backend issued: left by an earlier incarnation (a ZooKeeper
// ensemble recreated empty), it would refuse every write. The Committer
// swaps exactly that value for ours; it reports whether it did. When the
// backend cannot give its horizon or the Committer cannot swap, it
// returns why (ErrUnavailable): that is no sign the lock moved.
func (s *Seller) adoptForeignFence(ctx context.Context, lease Lease, err error) (bool, error) {
	var stale *service.StaleFenceError
	if !errors.As(err, &stale) || stale.Fence != lease.Fence() || stale.Stored > service.FenceCeiling(stale.Fence) {
		return false, nil
	}
	hz, ok := lease.(Horizoner)
	if !ok {
		return false, nil // any stored fence may be its own
	}
	horizon, herr := hz.Horizon(ctx)
	if herr != nil {
		return false, fmt.Errorf("%w: reading the lock backend's fence horizon to check sku %d's fence %d: %w", service.ErrUnavailable, stale.SKUID, stale.Stored, herr)
	}
	if stale.Stored <= horizon {
		return false, nil // ours was superseded
	}
	adopted, aerr := s.store.AdoptFence(ctx, stale.SKUID, stale.Stored, stale.Fence)
	if aerr != nil {
		return false, fmt.Errorf("%w: replacing sku %d's fence %d of an earlier lock backend: %w", service.ErrUnavailable, stale.SKUID, stale.Stored, aerr)
	}
	if !adopted {
		return false, nil // changed meanwhile: the next attempt reads it
	}
	s.log.Warn("the sku's fence was issued by an earlier incarnation of the lock backend (a ZooKeeper ensemble recreated from empty?): replaced by this one's",
		"sku", stale.SKUID, "stored_fence", stale.Stored, "horizon", horizon, "fence", stale.Fence)
	return true, nil
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
	wanting := h.wanting
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

// redisProbeInterval is how long the order path sells without the lock
// after Redis was found unreachable before it tries the lock again.
const redisProbeInterval = time.Second

// locks is the lock policy: when to wait for a SKU's lock, and when to
// sell on the database's guard alone. Shared by every worker.
type locks struct {
	locker Locker
	cfg    Config
	log    *slog.Logger
	obs    Observer

	skip     sync.Map     // sku id → unix nanos until which its lock is not awaited
	downTill atomic.Int64 // unix nanos until which the lock is skipped
	degraded atomic.Bool
}

// obtain takes the SKU's lock (ranked by rank unless 0), or returns nil to
// sell on the version column alone: when the lock store is unreachable,
// when a holder looked dead for a whole LockWait, or when live holders
// kept it for half the batch's time. Live holders are waited for, since
// selling beside them only makes transactions conflict (docs/locking.md,
// "Busy is not dead").
func (l *locks) obtain(ctx context.Context, skuID, rank int64) Lease {
	now := time.Now().UnixNano()
	if now < l.downTill.Load() {
		return nil
	}
	if until, ok := l.skip.Load(skuID); ok {
		if now < until.(int64) {
			return nil
		}
		l.skip.Delete(skuID)
	}
	key := service.SKULockKey(skuID)
	busy, cancelBusy := context.WithTimeout(ctx, max(l.cfg.TxTimeout/2, l.cfg.LockWait))
	defer cancelBusy()
	for {
		lctx, cancel := context.WithTimeout(busy, l.cfg.LockWait)
		lease, err := l.locker.Obtain(lctx, key, rank)
		cancel()
		switch {
		case err == nil:
			if l.degraded.CompareAndSwap(true, false) {
				l.log.Info("lock store reachable again: selling under the lock")
				l.obs.Degraded(false)
			}
			return lease
		case errors.Is(err, service.ErrLockUnavailable):
			l.downTill.Store(time.Now().Add(redisProbeInterval).UnixNano())
			if l.degraded.CompareAndSwap(false, true) {
				l.log.Warn("lock store (redis or zookeeper) unreachable: selling on the database guard alone (degraded)", "err", err)
				l.obs.Degraded(true)
			}
			return nil
		case busy.Err() == nil && errors.Is(lctx.Err(), context.DeadlineExceeded) && errors.Is(err, service.ErrLockBusy):
			continue // a whole LockWait of live holders: our turn comes
		case busy.Err() != nil || errors.Is(err, service.ErrLockBusy):
			// The last wait may have been cut short: nothing says the
			// holder died, so its lease is not skipped.
			l.log.Warn("lock busy with live holders for half the batch's time; selling this batch on the database guard alone", "sku", skuID, "err", err)
			return nil
		default:
			// No sign of life for a whole LockWait: the holder is likely
			// dead or stuck. Skip it until its lease has surely run out.
			l.skip.Store(skuID, time.Now().Add(l.cfg.LockTTL).UnixNano())
			l.log.Warn("lock held too long; selling on the database guard alone until its lease runs out", "sku", skuID, "err", err)
			return nil
		}
	}
}
