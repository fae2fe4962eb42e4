package app

import (
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// DirectoryConfig is what an instance believes of the SKUs without
// reading them, as cfg sets it: what Serve runs, and what tests of
// production behaviour run.
func DirectoryConfig(cfg config.Config) service.DirectoryConfig {
	return service.DirectoryConfig{
		ReadTimeout:    cfg.Order.TxTimeout,
		UnknownSKUTTL:  cfg.Order.UnknownSKUTTL,
		SoldOutTTL:     cfg.SoldOut.LocalTTL,
		SoldOutRecheck: cfg.SoldOut.Recheck,
	}
}

// EngineConfig is the order engine's configuration as cfg sets it, without
// replicas: what Serve runs, and what tests of production behaviour run.
func EngineConfig(cfg config.Config) engine.Config {
	return engine.Config{
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
		PaymentTimeout: cfg.Order.PaymentTimeout,
		FairWindow:     cfg.Order.FairWindow,
		PlaceGrace:     cfg.Order.PlaceGrace,
		PlacesMax:      cfg.Order.PlacesMax,
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

// OrderLockOptions are the order path's per-SKU lock options:
// LockOptions, and wanted notices so holders hear when another instance
// wants their SKU. Its client must be closed.
func OrderLockOptions(cfg config.Config) []lock.Option {
	return append(LockOptions(cfg), lock.WithWantedNotices(cfg.Lock.WantedNotices))
}
