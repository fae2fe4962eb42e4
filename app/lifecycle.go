package app

import (
	"context"
	"log/slog"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/metrics"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// lockAdapter is a lock of package locking, Redis or ZooKeeper, as the
// wiring hands it out: the engine's Locker, the sweeper's Elector, the admin's
// LockInspector, one value.
type lockAdapter interface {
	engine.Locker
	service.Elector
	service.LockInspector
}

// sweeperLock is the lock that elects the expiry sweeper: on Redis a
// client of its own without the lock observer, so that lock metrics count
// the order path only; on ZooKeeper, lk.
func sweeperLock(cfg config.Config, rs *redisSetup, lk lockAdapter) service.Elector {
	if cfg.Lock.Backend == config.BackendZooKeeper || len(rs.clients) == 0 {
		return lk
	}
	return locking.NewRedisLocker(rs.lockClient(append(wiring.LockOptions(cfg), lockReplicaOptions(cfg)...)...))
}

// startLifecycle returns the payment and cancellation of orders and
// starts the expiry sweeper, which sweeps while it holds the leader lease
// on lk. cl stops it, and waits, before the stores close.
func startLifecycle(ctx context.Context, cfg config.Config, store service.LifecycleStore, lk service.Elector, skus *service.Directory,
	mx *metrics.Metrics, log *slog.Logger, cl *closers) (*service.Lifecycle, error) {
	obs, err := metrics.NewLifecycle(mx)
	if err != nil {
		return nil, err
	}
	sweeper := service.NewSweeper(store, lk, skus, wiring.SweeperConfig(cfg), log, obs)
	sctx, stop := context.WithCancel(ctx) // SIGTERM steps down at once: another instance takes the lease
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweeper.Run(sctx)
	}()
	cl.add(func() error { stop(); <-done; return nil })
	return service.NewLifecycle(store, skus, log, obs), nil
}
