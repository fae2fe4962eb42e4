package service

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// ZooKeeperFences is where the ZooKeeper lock's fences start (1<<62 plus
// the node's creation zxid); the Redis lock's are below. Fences of two
// backends do not compare: a switch resets the comparison rather than
// refusing every write as stale (docs/design.md, invariant 12), and while
// both run only the version column guards the stock.
const ZooKeeperFences int64 = 1 << 62

// FenceCeiling returns the highest fence issued by the backend that issued
// f: a stored fence above it came from another backend.
func FenceCeiling(f int64) int64 {
	if f >= ZooKeeperFences {
		return math.MaxInt64
	}
	return ZooKeeperFences - 1
}

// FenceStale reports whether a batch fenced with f must be refused because
// the stored fence is newer and was issued by the same backend as f: its
// lease was superseded. A batch without a fence (f == 0) is never stale.
func FenceStale(stored, f int64) bool {
	return f > 0 && stored > f && stored <= FenceCeiling(f)
}

// StaleFenceError is the ErrStaleFence a Store returns, with the fences it
// compared.
type StaleFenceError struct {
	SKUID  int64
	Stored int64 // the SKU row's fence
	Fence  int64 // the batch's
}

func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("%v: sku %d carries fence %d, the batch %d", ErrStaleFence, e.SKUID, e.Stored, e.Fence)
}

func (e *StaleFenceError) Unwrap() error { return ErrStaleFence }

// adoptForeignFence recovers from a stored fence above anything the
// lease's backend issued: left by an earlier incarnation (a ZooKeeper
// ensemble recreated empty), it would refuse every write. The Store swaps
// exactly that value for ours; it reports whether it did. When the backend
// cannot give its horizon or the Store cannot swap, it returns why
// (ErrUnavailable): that is no sign the lock moved.
func (o *Orders) adoptForeignFence(ctx context.Context, lease Lease, err error) (bool, error) {
	var stale *StaleFenceError
	h, ok := lease.(FenceHorizonLease)
	if !ok || !errors.As(err, &stale) || stale.Fence != lease.Fence() || stale.Stored > FenceCeiling(stale.Fence) {
		return false, nil
	}
	horizon, herr := h.Horizon(ctx)
	if herr != nil {
		return false, fmt.Errorf("%w: reading the lock backend's fence horizon to check sku %d's fence %d: %w", ErrUnavailable, stale.SKUID, stale.Stored, herr)
	}
	if stale.Stored <= horizon {
		return false, nil // ours was superseded
	}
	adopted, aerr := o.store.AdoptFence(ctx, stale.SKUID, stale.Stored, stale.Fence)
	if aerr != nil {
		return false, fmt.Errorf("%w: replacing sku %d's fence %d of an earlier lock backend: %w", ErrUnavailable, stale.SKUID, stale.Stored, aerr)
	}
	if !adopted {
		return false, nil // changed meanwhile: the next attempt reads it
	}
	o.log.Warn("the sku's fence was issued by an earlier incarnation of the lock backend (a ZooKeeper ensemble recreated from empty?): replaced by this one's",
		"sku", stale.SKUID, "stored_fence", stale.Stored, "horizon", horizon, "fence", stale.Fence)
	return true, nil
}
