package engine

import (
	"context"
	"time"

	"github.com/seckill/seckill/service"
)

// leaseHold is a SKU's lock held by its worker across batches until
// someone else wants it, saving each batch an obtain and a release. The
// database accepts a repeated fence, and nobody else writes the SKU
// meanwhile, so known lets the next batch skip its reads.
type leaseHold struct {
	locks *locks
	sku   int64
	max   time.Duration
	lease Lease
	since time.Time
	known *service.SKU // the SKU after this lease's last batch; nil before its first
	// rank is the arrival (unix µs) of the oldest buyer the lock is
	// wanted for, under fair selling (fair.go); 0: obtained unranked.
	rank int64
	// unlocked says that fair selling's turn found no lease for the
	// batch: it sells on the database guard without trying again.
	unlocked bool
	// taken counts the buyers taken into batches since the lease was
	// obtained: a turn's floor (fair.go).
	taken int
	// knownOn is the server that committed known (Commit.Server), 0 when
	// not tracked: after a failover the row there is another one.
	knownOn int64
}

// acquire returns the held lease, or obtains one (nil: sell unlocked).
func (h *leaseHold) acquire(ctx context.Context) Lease {
	if h.unlocked {
		h.unlocked = false
		return nil
	}
	if h.lease != nil {
		lost := false
		select {
		case <-h.lease.Lost(): // a nil channel (no watchdog) is never ready
			lost = true
		default:
		}
		switch {
		case lost:
			h.release()
		case h.deaf() && time.Since(h.since) >= h.max && !h.unwanted():
			h.keep()
		}
	}
	if h.lease == nil {
		h.obtain(ctx)
	}
	return h.lease
}

// obtain takes the lock, ranked when h.rank is set; nil: sell unlocked.
func (h *leaseHold) obtain(ctx context.Context) {
	h.lease = h.locks.obtain(ctx, h.sku, h.rank)
	h.since = time.Now()
	h.known, h.knownOn, h.taken = nil, 0, 0
}

// deaf reports whether the holder cannot hand the lease over by age
// (fair.go): it was obtained unranked, or it does not hear who wants it
// (Redlock, wanted notices off). It then lets the lease go, when wanted,
// after each LockHold.
func (h *leaseHold) deaf() bool { return h.rank == 0 || h.lease.Wanting() == nil }

// unwanted reports whether the lease is known to be wanted by nobody else:
// then the worker holds on past max without a round trip.
func (h *leaseHold) unwanted() bool {
	w := h.lease.Wanting()
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
// max is 0.
func (h *leaseHold) keep() bool {
	if h.max <= 0 {
		h.release()
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	kept, err := h.lease.Keep(ctx)
	if kept {
		h.since = time.Now()
		return true
	}
	if err != nil {
		h.locks.log.Warn("lock release failed", "sku", h.sku, "err", err)
	}
	h.lease, h.known = nil, nil // Keep let it go
	return false
}

// release lets the lease go, if one is held.
func (h *leaseHold) release() {
	h.known = nil
	if h.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := h.lease.Release(ctx); err != nil {
		h.locks.log.Warn("lock release failed", "sku", h.sku, "err", err)
	}
	h.lease = nil
}
