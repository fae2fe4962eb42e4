package app_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/zookeeper"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// zkInstance starts one service on the ZooKeeper lock backend, without
// Redis, with every other setting at its default.
func zkInstance(t *testing.T, dsn string, zkAddrs []string, root string) string {
	t.Helper()
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.MySQL.DSN = dsn
	cfg.MySQL.MaxOpenConns = 16
	cfg.MySQL.MaxIdleConns = 16
	cfg.Admin.Token = token
	noShopperAuth(&cfg)
	cfg.Lock.Backend = config.BackendZooKeeper
	cfg.ZooKeeper.Addrs = zkAddrs
	cfg.ZooKeeper.Root = root
	if err := cfg.ValidateServe(); err != nil {
		t.Fatal(err)
	}
	return "http://" + serveConfig(t, cfg)
}

// TestZooKeeper_StaleHolderRefusedByZxidFence is the articles' scenario: a
// holder cut off from ZooKeeper past its session timeout (a long GC pause
// or a partition) loses its node, a second client obtains the lock and
// commits, and the first one's later write is refused by the database
// through the zxid fence.
func TestZooKeeper_StaleHolderRefusedByZxidFence(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	proxy := testenv.StartProxy(t, z.Addrs()[0])
	root := "/" + testenv.Name("fence")
	session := config.Default().ZooKeeper.SessionTimeout
	a := zookeeper.New(testenv.ZKConn(t, []string{proxy.Addr}, session, nil), zookeeper.Options{Root: root, FenceBase: service.ZooKeeperFences})
	b := zookeeper.New(testenv.ZKConn(t, z.Addrs(), session, nil), zookeeper.Options{Root: root, FenceBase: service.ZooKeeperFences})
	store := repository.NewMySQL(testenv.DB(t, testenv.Database(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sku, err := store.CreateSKU(ctx, service.SKU{Name: "fenced", TotalStock: 10, Stock: 10, PerUserLimit: 10, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("sku:%d", sku.ID)
	commit := func(fence int64, user string) error {
		_, err := store.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Fence: fence, Now: time.Now().UTC(),
			Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: user, Quantity: 1}}})
		return err
	}

	la, err := a.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(la.Fence(), "a-before"); err != nil {
		t.Fatalf("first holder's commit: %v", err)
	}
	proxy.Cut() // A freezes, from ZooKeeper's point of view
	lb, err := b.Obtain(ctx, key)
	if err != nil {
		t.Fatalf("second client after A's session expired: %v", err)
	}
	if err := commit(lb.Fence(), "b"); err != nil {
		t.Fatalf("second holder's commit: %v", err)
	}
	// A wakes up still believing it holds the lock.
	err = commit(la.Fence(), "a-after")
	if !errors.Is(err, service.ErrConflict) && !errors.Is(err, service.ErrStaleFence) {
		t.Errorf("stale holder's commit (fence %d after %d) = %v; want refused", la.Fence(), lb.Fence(), err)
	}
	got, err := store.SKU(ctx, sku.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sold != 2 || got.Stock != 8 || got.Fence != lb.Fence() {
		t.Errorf("sold %d stock %d fence %d; want 2, 8, %d (the stale write changes nothing)", got.Sold, got.Stock, got.Fence, lb.Fence())
	}
	proxy.Restore()
	select {
	case <-la.Lost():
	case <-ctx.Done():
		t.Fatal("the stale holder's Lost never closed after it reconnected")
	}
	if err := lb.Release(ctx); err != nil {
		t.Error(err)
	}
}

// TestLockBackendSwitch_NeitherWayRefusesEveryWrite switches one SKU's
// writers from the Redis lock to the ZooKeeper lock and back, with real
// fences of both: no switch leaves the SKU refusing every write, and within
// one backend a stale fence is still refused.
func TestLockBackendSwitch_NeitherWayRefusesEveryWrite(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	rdb, prefix := testenv.Redis(t)
	redisLock := lock.New(rdb, lock.WithPrefix(prefix))
	zkLock := zookeeper.New(testenv.ZKConn(t, z.Addrs(), config.Default().ZooKeeper.SessionTimeout, nil),
		zookeeper.Options{Root: "/" + testenv.Name("switch"), FenceBase: service.ZooKeeperFences})
	store := repository.NewMySQL(testenv.DB(t, testenv.Database(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sku, err := store.CreateSKU(ctx, service.SKU{Name: "switch", TotalStock: 10, Stock: 10, PerUserLimit: 10, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("sku:%d", sku.ID)
	sold := int64(0)
	commit := func(name string, fence int64, wantRefused bool) {
		t.Helper()
		_, err := store.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Fence: fence, Now: time.Now().UTC(),
			Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: name, Quantity: 1}}})
		refused := errors.Is(err, service.ErrConflict) || errors.Is(err, service.ErrStaleFence)
		if err != nil && !refused {
			t.Fatalf("%s: %v", name, err)
		}
		if refused != wantRefused {
			t.Errorf("%s: CommitBatch(fence %d) = %v; want refused %v", name, fence, err, wantRefused)
		}
		if err == nil {
			sold++
		}
	}
	type lease = interface {
		Fence() int64
		Release(context.Context) error
	}
	fenceOf := func(obtain func() (lease, error)) int64 {
		t.Helper()
		l, err := obtain()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return l.Fence()
	}
	onRedis := func() (lease, error) { return redisLock.Obtain(ctx, key) }
	onZK := func() (lease, error) { return zkLock.Obtain(ctx, key) }

	r1, r2 := fenceOf(onRedis), fenceOf(onRedis)
	commit("redis", r2, false)
	commit("stale redis holder", r1, true)
	z1, z2 := fenceOf(onZK), fenceOf(onZK)
	commit("switched to zookeeper", z2, false)
	commit("stale zookeeper holder", z1, true)
	r3, r4 := fenceOf(onRedis), fenceOf(onRedis)
	commit("switched back to redis", r4, false)
	commit("stale redis holder after the switch back", r3, true)
	z3 := fenceOf(onZK)
	commit("zookeeper again", z3, false)

	got, err := store.SKU(ctx, sku.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sold != sold || got.Stock != 10-sold || sold != 4 {
		t.Errorf("sold %d stock %d; want %d sold by 4 accepted batches", got.Sold, got.Stock, sold)
	}
}
