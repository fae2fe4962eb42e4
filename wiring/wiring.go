// Package wiring turns the one config.Config into each package's own
// configuration. app.Serve runs what it returns, and so do the tests of
// production behaviour, which import it instead of the composition root:
// one translation for both, so a test's defaults are production's.
package wiring

import (
	"os"
	"strconv"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// DirectoryConfig is what an instance believes of the SKUs without
// reading them, as cfg sets it.
func DirectoryConfig(cfg config.Config) service.DirectoryConfig {
	return service.DirectoryConfig{
		ReadTimeout:    cfg.Order.TxTimeout,
		UnknownSKUTTL:  cfg.Order.UnknownSKUTTL,
		SoldOutTTL:     cfg.SoldOut.LocalTTL,
		SoldOutRecheck: cfg.SoldOut.Recheck,
	}
}

// WatchConfig bounds the long-polls of orders as cfg sets it.
func WatchConfig(cfg config.Config) service.WatchConfig {
	return service.WatchConfig{Max: cfg.Order.LongPollsMax, Recheck: cfg.Order.LongPollRecheck}
}

// SweeperConfig is the expiry sweeper's configuration as cfg sets it.
func SweeperConfig(cfg config.Config) service.SweeperConfig {
	return service.SweeperConfig{Interval: cfg.Order.SweepInterval, Batch: cfg.Order.SweepBatch, TxTimeout: cfg.Order.TxTimeout}
}

// EngineConfig is the order engine's configuration as cfg sets it, without
// replicas.
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
		WaitlistMax:    int64(cfg.Order.WaitlistMax),
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
		lock.WithOwner(InstanceName()),
	}
}

// OrderLockOptions are the order path's per-SKU lock options:
// LockOptions, and wanted notices so holders hear when another instance
// wants their SKU. Its client must be closed.
func OrderLockOptions(cfg config.Config) []lock.Option {
	return append(LockOptions(cfg), lock.WithWantedNotices(cfg.Lock.WantedNotices))
}

// InstanceName names this process's leases (lock.WithOwner): the host
// name, which is the pod's in Kubernetes, and the process id.
func InstanceName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

// RelayConfig is the event relay's configuration as cfg sets it.
func RelayConfig(cfg config.Config) events.Config {
	e := cfg.Events
	return events.Config{Subject: e.Subject, Batch: e.Batch, Interval: e.Interval, MaxBackoff: e.MaxBackoff,
		PublishTimeout: e.PublishTimeout, Retention: e.Retention}
}

// StreamConfig is the JetStream stream of the events as cfg sets it.
func StreamConfig(cfg config.Config) events.StreamConfig {
	e := cfg.Events
	return events.StreamConfig{Name: e.Stream, Subject: e.Subject, MaxAge: e.StreamMaxAge, Duplicate: e.DuplicateWindow}
}
