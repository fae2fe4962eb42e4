package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill/seckill/service"
)

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
	horizon, herr := lease.Horizon(ctx)
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
