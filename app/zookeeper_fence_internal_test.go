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
	"github.com/seckill/seckill/wiring"
)

// TestOpenZooKeeper_FencesInTheRangeTheStoreKnowsAsZooKeepersAndListed: the
// wired ZooKeeper lock issues fences at or above service.ZooKeeperFences, so
// a store tells them from Redis's (service.FenceCeiling), and HeldLocks
// (`seckill locks`) lists its held locks.
func TestOpenZooKeeper_FencesInTheRangeTheStoreKnowsAsZooKeepersAndListed(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cfg := config.Default()
	cfg.ZooKeeper.Addrs = z.Addrs()
	cfg.ZooKeeper.Root = "/" + testenv.Name("fence")
	cfg.Lock.Backend = config.BackendZooKeeper
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
	l, err := zc.locker.Obtain(ctx, "sku:1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if f := l.Fence(); f < service.ZooKeeperFences {
		t.Errorf("Fence() = %d; want at least service.ZooKeeperFences (%d)", f, service.ZooKeeperFences)
	}

	// `seckill locks` on the same config lists it, named after this process.
	if _, err := zc.locker.Obtain(ctx, "sku:2", 0); err != nil {
		t.Fatal(err)
	}
	held, err := HeldLocks(ctx, cfg, slog.New(slog.DiscardHandler), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || held[0].SKU != 1 || held[1].SKU != 2 {
		t.Fatalf("HeldLocks = %+v; want SKUs 1 and 2", held)
	}
	if st := held[0].State; !st.Held || st.Owner != wiring.InstanceName() || st.Fence != l.Fence() || st.Since.IsZero() {
		t.Errorf("HeldLocks: SKU 1 %+v; want held by %s with fence %d", st, wiring.InstanceName(), l.Fence())
	}
}
