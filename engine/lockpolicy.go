package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/service"
)

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
