package app

import (
	"context"
	"time"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/compare"
)

// OrdersConfig is the order path's configuration as cfg sets it: what
// Serve runs, and what tests of production behaviour run.
func OrdersConfig(cfg config.Config) service.OrdersConfig {
	return service.OrdersConfig{
		QueueMax:       cfg.Order.QueueMax,
		MaxLiveSKUs:    cfg.Order.MaxLiveSKUs,
		BatchMax:       cfg.Order.BatchMax,
		Linger:         cfg.Order.Linger,
		RequestTimeout: cfg.Order.RequestTimeout,
		TxTimeout:      cfg.Order.TxTimeout,
		LockWait:       cfg.Lock.Wait,
		LockTTL:        cfg.Lock.TTL,
		LockHold:       cfg.Lock.HoldMax,
		LockHoldIdle:   cfg.Lock.HoldIdle,
		MaxRetries:     cfg.Order.MaxRetries,
		IdleTimeout:    cfg.Order.IdleTimeout,
		UnknownSKUTTL:  cfg.Order.UnknownSKUTTL,
		SoldOutTTL:     cfg.SoldOut.LocalTTL,
		SoldOutRecheck: cfg.SoldOut.Recheck,
		PaymentTimeout: cfg.Order.PaymentTimeout,
	}
}

// LockOptions are the lock client's options as cfg sets them, without an
// observer.
func LockOptions(cfg config.Config) []lock.Option {
	return []lock.Option{
		lock.WithPrefix(cfg.Lock.Prefix),
		lock.WithTTL(cfg.Lock.TTL),
		lock.WithQueueMax(cfg.Lock.QueueMax),
		lock.WithWatchdog(cfg.Lock.Watchdog),
		lock.WithRetry(time.Millisecond, 32*time.Millisecond, 0),
		lock.WithOwner(instanceName()),
	}
}

// OrderLockOptions are the options of the per-SKU lock of the order path:
// LockOptions, and its holders hear when another instance wants their SKU
// (lock.wanted_notices). Its client must be closed.
func OrderLockOptions(cfg config.Config) []lock.Option {
	return append(LockOptions(cfg), lock.WithWantedNotices(cfg.Lock.WantedNotices))
}

// orderFlow returns what the API sells with: orders itself in production
// (order.strategy "locked"), or the comparison design that
// order.strategy names, which `make bench` measures against it. The
// per-request design polls Redis through a fresh lock client per request
// (lk, the configured lock, without Redis).
func orderFlow(cfg config.Config, orders *service.Orders, store service.Store, lk service.Locker, rs *redisSetup, obs compare.Observer) (handler.Orders, error) {
	if cfg.Order.Strategy == config.Strategies[0] {
		return orders, nil
	}
	if rs != nil && len(rs.clients) > 0 {
		opts := append(LockOptions(cfg), lockReplicaOptions(cfg)...)
		lk = pollingLocker{func() *lock.Client { return rs.lockClient(opts...) }}
	}
	design, err := compare.New(compare.Design(cfg.Order.Strategy), store, lk, compare.Config{
		RequestTimeout: cfg.Order.RequestTimeout,
		LockWait:       cfg.Lock.Wait,
		MaxRetries:     cfg.Order.MaxRetries,
	}, obs)
	if err != nil {
		return nil, err
	}
	return benchFlow{Orders: orders, design: design}, nil
}

// benchFlow sells with a comparison design; everything else (reads,
// counters) is production's.
type benchFlow struct {
	*service.Orders
	design *compare.Orders
}

func (f benchFlow) Place(ctx context.Context, r service.OrderRequest) (service.Placed, error) {
	return f.design.Place(ctx, r)
}
