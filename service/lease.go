package service

import (
	"context"
	"time"
)

// leaseHold is a SKU's lock as its worker holds it across batches, until
// someone else wants it, sparing each batch the obtain and release round
// trips. The database accepts a fence equal to the last one it saw, so the
// fence stays valid across the hold. No other holder writes the SKU meanwhile,
// so the row as the last batch left it (known) lets the next one skip its
// reads.
type leaseHold struct {
	o     *Orders
	sku   int64
	max   time.Duration
	lease Lease
	since time.Time
	known *SKU // the SKU after this lease's last batch; nil before its first
}

// acquire returns the held lease, or obtains one (nil: sell unlocked).
func (h *leaseHold) acquire(ctx context.Context) Lease {
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
		case time.Since(h.since) >= h.max && !h.unwanted():
			h.keep()
		}
	}
	if h.lease == nil {
		h.lease = h.o.obtain(ctx, h.sku)
		h.since = time.Now()
		h.known = nil
	}
	return h.lease
}

func (h *leaseHold) wanting() <-chan struct{} {
	if w, ok := h.lease.(WantedLease); ok {
		return w.Wanting()
	}
	return nil
}

// unwanted reports whether the lease is known to be wanted by nobody else:
// then the worker holds on past max without a round trip.
func (h *leaseHold) unwanted() bool {
	w := h.wanting()
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

// keep starts another LockHold with the held lease if no other holder
// waits for it, and else lets it go; it reports whether it is still held.
// A lease that cannot be kept this way (ZooKeeper), and every lease when
// max is 0 (one hold per batch), is let go.
func (h *leaseHold) keep() bool {
	k, ok := h.lease.(KeepableLease)
	if !ok || h.max <= 0 {
		h.release()
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	kept, err := k.Keep(ctx)
	if kept {
		h.since = time.Now()
		return true
	}
	if err != nil {
		h.o.log.Warn("lock release failed", "sku", h.sku, "err", err)
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
		h.o.log.Warn("lock release failed", "sku", h.sku, "err", err)
	}
	h.lease = nil
}
