package service

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// ZooKeeperFences is where the ZooKeeper lock's fences start (1<<62 plus the
// lock node's creation zxid); the Redis lock's are below it
// (microsecond-seeded, about 2^51 today). Fences of different backends do
// not compare, so a Store accepts a batch whose fence is no older than the
// stored one, or whose stored fence was issued by the other backend: a
// switch of lock backend resets the comparison instead of leaving every
// write refused as stale (docs/design.md, invariant 12). While both backends are
// in use (a rolling switch) a holder of one excludes nobody of the other,
// and the version column alone guards the stock, as in fallback mode.
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

// adoptForeignFence recovers from a fence the lease's backend never
// issued: a stored fence above the backend's horizon came from an earlier
// incarnation (a ZooKeeper ensemble recreated empty), not a newer holder,
// and would refuse every write until the zxids caught up. The Store swaps
// exactly that value for ours (compare-and-set); it reports whether it did.
func (o *Orders) adoptForeignFence(ctx context.Context, lease Lease, err error) bool {
	var stale *StaleFenceError
	h, ok := lease.(FenceHorizonLease)
	if !ok || !errors.As(err, &stale) || stale.Fence != lease.Fence() || stale.Stored > FenceCeiling(stale.Fence) {
		return false
	}
	horizon, herr := h.Horizon(ctx)
	if herr != nil || stale.Stored <= horizon {
		return false // ours was superseded, or we cannot tell
	}
	adopted, aerr := o.store.AdoptFence(ctx, stale.SKUID, stale.Stored, stale.Fence)
	if aerr != nil || !adopted {
		return false
	}
	o.log.Warn("the sku's fence was issued by an earlier incarnation of the lock backend (a ZooKeeper ensemble recreated from empty?): replaced by this one's",
		"sku", stale.SKUID, "stored_fence", stale.Stored, "horizon", horizon, "fence", stale.Fence)
	return true
}
