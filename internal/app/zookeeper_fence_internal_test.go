package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// TestOpenZooKeeper_FencesInTheRangeTheStoreKnowsAsZooKeepers: the wired
// ZooKeeper lock issues fences at or above service.ZooKeeperFences, so a
// Store tells them from Redis's (service.FenceCeiling).
func TestOpenZooKeeper_FencesInTheRangeTheStoreKnowsAsZooKeepers(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cfg := config.Default()
	cfg.ZooKeeper.Addrs = z.Addrs()
	cfg.ZooKeeper.Root = "/" + testenv.Name("fence")
	zc, err := openZooKeeper(cfg, slog.New(slog.DiscardHandler), lock.NopObserver{})
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for zc.Up(ctx) != nil && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // waiting for the session, bounded by ctx
	}
	l, err := zc.locker.Obtain(ctx, "sku:1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if f := l.Fence(); f < service.ZooKeeperFences {
		t.Errorf("Fence() = %d; want at least service.ZooKeeperFences (%d)", f, service.ZooKeeperFences)
	}
}
