package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// pausedStore holds the first sweep of its sweeper before its transaction
// begins, as a process frozen there would be, and reports what the real
// store answered when the sweep is let go. The sweep then runs on a
// context its lease's loss cannot cancel: a frozen process resumes
// without having seen the loss.
type pausedStore struct {
	service.LifecycleStore
	once    sync.Once
	entered chan service.ExpiryRun
	resume  chan struct{}
	answer  chan error
	resumed sync.Once
}

// thaw lets the frozen sweep go on; once, from the test or its cleanup.
func (p *pausedStore) thaw() { p.resumed.Do(func() { close(p.resume) }) }

func (p *pausedStore) ExpireDue(ctx context.Context, run service.ExpiryRun) (service.Expiry, error) {
	first := false
	p.once.Do(func() { first = true })
	if !first {
		return p.LifecycleStore.ExpireDue(ctx, run)
	}
	p.entered <- run
	<-p.resume
	ex, err := p.LifecycleStore.ExpireDue(context.WithoutCancel(ctx), run)
	p.answer <- err
	return ex, err
}

// returns counts the units every sweeper and cancel returned.
type returns struct {
	units   atomic.Int64
	leaders atomic.Int64
}

func (r *returns) OrderSettled(s service.OrderStatus, _ int, units int64) {
	if s == service.OrderExpired {
		r.units.Add(units)
	}
}
func (r *returns) Swept(time.Duration, time.Duration, error) {}
func (r *returns) SweeperLeader(on bool) {
	if on {
		r.leaders.Add(1)
	}
}

// sweeperOf is an instance's sweeper with production settings, on the
// rig's Redis and key prefix.
func sweeperOf(t *testing.T, r *rig, store service.LifecycleStore, obs service.LifecycleObserver) *service.Sweeper {
	t.Helper()
	pc := config.Default()
	pc.Lock.Prefix = r.Prefix
	return service.NewSweeper(store, locking.NewRedisLocker(lock.New(r.Redis, wiring.LockOptions(pc)...)), r.SKUs, wiring.SweeperConfig(pc), testenv.Logger(), obs)
}

// run runs s until the test ends; the returned func stops it and waits.
func run(t *testing.T, s *service.Sweeper) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// placeAll buys one unit for each user through o.
func placeAll(t *testing.T, o *service.Orders, skuID int64, users ...string) {
	t.Helper()
	for _, u := range users {
		if _, err := o.Place(context.Background(), service.OrderRequest{SKUID: skuID, UserID: u, Quantity: 1}); err != nil {
			t.Fatalf("Place(%s) = %v", u, err)
		}
	}
}

// closeWindow ends the payment window of the SKU's pending orders an hour
// ago: their buyers never paid, and they are due for any sweep, also one
// whose clock was read (frozen) before this ran.
func closeWindow(t *testing.T, r *rig, skuID int64) {
	t.Helper()
	if err := r.DB.Exec("UPDATE orders SET expires_at = ? WHERE sku_id = ? AND status = 'pending'", time.Now().UTC().Add(-time.Hour), skuID).Error; err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, r *rig, skuID int64, status service.OrderStatus) int64 {
	t.Helper()
	var n int64
	if err := r.DB.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ? AND status = ?", skuID, status).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// waitUnits polls until the sweepers observed n units returned (a sweep
// reports after its commit), for at most 30 s, and returns what they saw.
func (r *returns) waitUnits(n int64) int64 {
	deadline := time.Now().Add(30 * time.Second)
	for r.units.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling, bounded above
	}
	return r.units.Load()
}

// waitCount polls until n orders of the SKU are in status, for at most
// 30 s.
func waitCount(t *testing.T, r *rig, skuID int64, status service.OrderStatus, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for count(t, r, skuID, status) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d orders %s after 30s; want %d", count(t, r, skuID, status), status, n)
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded above
	}
}

// TestSweeper_PausedLeaderIsFencedOut: sweeper A is elected and frozen
// inside its sweep; its lease runs out (the key vanishes from Redis, as
// it does when a frozen process stops renewing it); B is elected, expires
// every due order and returns their units, which new buyers then buy on B
// (its sold-out mark cleared). A resumes with its old fence while those
// new orders are due: the database refuses its whole transaction
// (ErrStaleFence) and A steps down; elected again later, it expires them
// under a new fence. Every unit is returned once: the units the sweepers
// returned equal the orders expired.
func TestSweeper_PausedLeaderIsFencedOut(t *testing.T) {
	// Not parallel: the package's timing-bound tests (10,000 buyers within
	// one transaction's timeout) run after the sweepers, not beside them.
	const n = 10
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:sweep:") + ":"
	a := newRig(t, dsn, rigOptions{Prefix: prefix})
	b := newRig(t, dsn, rigOptions{Prefix: prefix})
	sku := wiringtest.CreateSKU(t, a.Store, n, 1)
	placeAll(t, a.Orders, sku.ID, users("first", n)...)
	if _, err := b.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "late", Quantity: 1}); !errors.Is(err, service.ErrSoldOut) {
		t.Fatalf("Place on B after the sell-out = %v; want ErrSoldOut", err)
	}
	closeWindow(t, a, sku.ID)

	var obs returns
	paused := &pausedStore{LifecycleStore: repository.NewMySQL(a.DB), entered: make(chan service.ExpiryRun, 1), resume: make(chan struct{}), answer: make(chan error, 1)}
	run(t, sweeperOf(t, a, paused, &obs))
	t.Cleanup(paused.thaw) // before the sweeper's stop: a failed test leaves it no frozen sweep to wait for
	var frozen service.ExpiryRun
	select {
	case frozen = <-paused.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("sweeper A was not elected within 30s")
	}
	if frozen.Fence == 0 {
		t.Fatal("A's lease has no fence")
	}
	// A's lease runs out while A is frozen.
	if err := a.Redis.Del(context.Background(), prefix+"{"+service.SweeperLeaseKey+"}").Err(); err != nil {
		t.Fatal(err)
	}

	stopB := run(t, sweeperOf(t, b, repository.NewMySQL(b.DB), &obs))
	waitCount(t, b, sku.ID, service.OrderExpired, n)
	stopB()
	// The returned units are sold again, on B, to new buyers.
	sellsWithin(t, b.Orders, sku.ID, "second-0")
	placeAll(t, b.Orders, sku.ID, users("second", n)[1:]...)
	closeWindow(t, b, sku.ID)

	paused.thaw()
	select {
	case err := <-paused.answer:
		if !errors.Is(err, service.ErrStaleFence) {
			t.Errorf("A's sweep after its lease ran out = %v; want ErrStaleFence", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("A's sweep did not return within 30s of resuming")
	}
	// A is elected again under a new fence and expires the second orders.
	waitCount(t, a, sku.ID, service.OrderExpired, 2*n)
	if got := obs.waitUnits(2 * n); got != 2*n {
		t.Errorf("the sweepers returned %d units; %d orders expired", got, 2*n)
	}
	if sold := testenv.CheckInvariants(t, a.DB, sku.ID); sold != 0 {
		t.Errorf("sold = %d; want 0 (every order expired)", sold)
	}
	if l := obs.leaders.Load(); l < 3 {
		t.Errorf("%d leaderships; want A, B, then A again", l)
	}
}

// TestSweeper_RestockDuringSweepsIsSoldOnAnotherInstance: while B's
// sweeper returns units, an admin restocks through A; every returned and
// restocked unit is sold again through B, and the stock adds up.
func TestSweeper_RestockDuringSweepsIsSoldOnAnotherInstance(t *testing.T) {
	const n = 20
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:sweep:") + ":"
	a := newRig(t, dsn, rigOptions{Prefix: prefix})
	b := newRig(t, dsn, rigOptions{Prefix: prefix})
	sku := wiringtest.CreateSKU(t, a.Store, n, 1)
	placeAll(t, b.Orders, sku.ID, users("first", n)...)
	closeWindow(t, a, sku.ID)

	var obs returns
	run(t, sweeperOf(t, b, repository.NewMySQL(b.DB), &obs))
	if _, err := a.Catalog.SetStock(context.Background(), sku.ID, 5); err != nil {
		t.Fatal(err)
	}
	waitCount(t, a, sku.ID, service.OrderExpired, n)
	// Whatever the order of the restock and the returns, the units left
	// are sold on B: 5 restocked, plus the n returned if they came after.
	s, err := a.Store.SKU(context.Background(), sku.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stock != 5 && s.Stock != 5+n {
		t.Fatalf("stock after restock and returns = %d; want 5 or %d", s.Stock, 5+n)
	}
	left := s.Stock
	sellsWithin(t, b.Orders, sku.ID, "second-0")
	placeAll(t, b.Orders, sku.ID, users("second", int(left))[1:]...)
	if _, err := b.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "one-too-many", Quantity: 1}); !errors.Is(err, service.ErrSoldOut) {
		t.Errorf("Place beyond the stock = %v; want ErrSoldOut", err)
	}
	if sold := testenv.CheckInvariants(t, a.DB, sku.ID); sold != left {
		t.Errorf("sold = %d; want %d", sold, left)
	}
	if got := obs.waitUnits(n); got != n {
		t.Errorf("returned %d units; want %d", got, n)
	}
}

func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// TestSweeper_LockUnreachableSweepsUnfencedOnce: with Redis down no
// sweeper can be elected; each sweeps on the database's guard alone, as
// the order path sells, and still every unit comes back once.
func TestSweeper_LockUnreachableSweepsUnfencedOnce(t *testing.T) {
	const n = 30
	srv := testenv.StartRedis(t)
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:sweep:") + ":"
	a := newRig(t, dsn, rigOptions{RedisAddr: srv.Addr, Prefix: prefix})
	b := newRig(t, dsn, rigOptions{RedisAddr: srv.Addr, Prefix: prefix})
	sku := wiringtest.CreateSKU(t, a.Store, n, 1)
	placeAll(t, a.Orders, sku.ID, users("first", n)...)
	closeWindow(t, a, sku.ID)
	srv.Stop()

	var obs returns
	run(t, sweeperOf(t, a, repository.NewMySQL(a.DB), &obs))
	run(t, sweeperOf(t, b, repository.NewMySQL(b.DB), &obs))
	waitCount(t, a, sku.ID, service.OrderExpired, n)
	if got := obs.waitUnits(n); got != n {
		t.Errorf("the sweepers returned %d units; %d orders expired", got, n)
	}
	if l := obs.leaders.Load(); l != 0 {
		t.Errorf("%d leaderships without Redis; want none", l)
	}
	if sold := testenv.CheckInvariants(t, a.DB, sku.ID); sold != 0 {
		t.Errorf("sold = %d; want 0", sold)
	}
}
