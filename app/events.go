package app

import (
	"context"
	"log/slog"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/metrics"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// startEvents starts the order events' relay (events.enabled), elected
// by lk as the sweeper is, publishing to NATS JetStream. A broker down at
// start delays nothing: the relay backs off and the outbox grows. cl
// stops it, and waits, before the stores close.
func startEvents(ctx context.Context, cfg config.Config, outbox events.Outbox, lk service.Elector, ids events.IDs,
	mx *metrics.Metrics, log *slog.Logger, cl *closers) error {
	if !cfg.Events.Enabled {
		return nil
	}
	obs, err := metrics.NewEvents(mx)
	if err != nil {
		return err
	}
	pub, err := events.NewJetStream(cfg.Events.NATSURL, wiring.StreamConfig(cfg))
	if err != nil {
		return err
	}
	relay := events.NewRelay(outbox, pub, lk, ids, wiring.RelayConfig(cfg), log, obs)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		relay.Run(rctx)
	}()
	cl.add(func() error { stop(); <-done; pub.Close(); return nil })
	return nil
}
