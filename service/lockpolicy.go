package service

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// redisProbeInterval is how long the order path sells without the lock
// after Redis was found unreachable before it tries the lock again.
const redisProbeInterval = time.Second

// Degraded reports whether the last attempt to take a lock found Redis
// unreachable, so that orders are sold on the database's guard alone.
func (o *Orders) Degraded() bool { return o.degraded.Load() }

// obtain takes the SKU's lock (ranked by rank unless 0), or returns nil to sell on the version
// column alone: when the lock store is unreachable, when a holder looked
// dead for a whole LockWait, or when live holders kept it for half the
// batch's time. Live holders are waited for, since selling beside them
// only makes transactions conflict (docs/locking.md, "Busy is not dead").
func (o *Orders) obtain(ctx context.Context, skuID, rank int64) Lease {
	now := time.Now().UnixNano()
	if now < o.lockDownTill.Load() {
		return nil
	}
	if until, ok := o.lockSkip.Load(skuID); ok {
		if now < until.(int64) {
			return nil
		}
		o.lockSkip.Delete(skuID)
	}
	key := "sku:" + strconv.FormatInt(skuID, 10)
	busy, cancelBusy := context.WithTimeout(ctx, max(o.cfg.TxTimeout/2, o.cfg.LockWait))
	defer cancelBusy()
	for {
		lctx, cancel := context.WithTimeout(busy, o.cfg.LockWait)
		lease, err := o.lockOnce(lctx, key, rank)
		cancel()
		switch {
		case err == nil:
			if o.degraded.CompareAndSwap(true, false) {
				o.log.Info("lock store reachable again: selling under the lock")
				o.obs.Degraded(false)
			}
			return lease
		case errors.Is(err, ErrLockUnavailable):
			o.lockDownTill.Store(time.Now().Add(redisProbeInterval).UnixNano())
			if o.degraded.CompareAndSwap(false, true) {
				o.log.Warn("lock store (redis or zookeeper) unreachable: selling on the database guard alone (degraded)", "err", err)
				o.obs.Degraded(true)
			}
			return nil
		case busy.Err() == nil && errors.Is(lctx.Err(), context.DeadlineExceeded) && errors.Is(err, ErrLockBusy):
			continue // a whole LockWait of live holders: our turn comes
		case busy.Err() != nil || errors.Is(err, ErrLockBusy):
			// The last wait may have been cut short: nothing says the
			// holder died, so its lease is not skipped.
			o.log.Warn("lock busy with live holders for half the batch's time; selling this batch on the database guard alone", "sku", skuID, "err", err)
			return nil
		default:
			// No sign of life for a whole LockWait: the holder is likely
			// dead or stuck. Skip it until its lease has surely run out.
			o.lockSkip.Store(skuID, time.Now().Add(o.cfg.LockTTL).UnixNano())
			o.log.Warn("lock held too long; selling on the database guard alone until its lease runs out", "sku", skuID, "err", err)
			return nil
		}
	}
}

// lockOnce asks the locker for key, ranked when rank is set and the
// locker ranks (fair.go).
func (o *Orders) lockOnce(ctx context.Context, key string, rank int64) (Lease, error) {
	if rl, ok := o.locker.(RankedLocker); ok && rank != 0 {
		return rl.ObtainRanked(ctx, key, rank)
	}
	return o.locker.Obtain(ctx, key)
}
