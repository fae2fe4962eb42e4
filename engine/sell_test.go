package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

func TestPlace_ConcurrentBuyersSellExactlyTheStock(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	r := newRig(t, dsn, rigOptions{})
	sku := wiringtest.CreateSKU(t, r.Store, 500, 1)

	results := wiringtest.Buyers(t, r.Orders, sku.ID, 2000, nil)

	if results["created"] != 500 {
		t.Errorf("created = %d; want 500 (results %v)", results["created"], results)
	}
	if got := results["sold_out"] + results["limit_exceeded"] + results["created"]; got != 2200 {
		t.Errorf("answered %d of 2200 with created/sold_out/limit_exceeded: %v", got, results)
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 500 {
		t.Errorf("sold = %d; want 500", sold)
	}
}

func TestPlace_TwoInstancesShareOneSKU(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	a := newRig(t, dsn, rigOptions{})
	b := newRig(t, dsn, rigOptions{})
	sku := wiringtest.CreateSKU(t, a.Store, 300, 1)
	var wg sync.WaitGroup
	var ra, rb map[string]int
	wg.Add(2)
	go func() { defer wg.Done(); ra = wiringtest.Buyers(t, a.Orders, sku.ID, 500, nil) }()
	go func() { defer wg.Done(); rb = wiringtest.Buyers(t, b.Orders, sku.ID, 500, nil) }()
	wg.Wait()
	// Users u-0.. exist in both crowds: the per-user limit spans instances.
	if got := ra["created"] + rb["created"]; got != 300 {
		t.Errorf("created = %d + %d; want 300", ra["created"], rb["created"])
	}
	if sold := testenv.CheckInvariants(t, a.DB, sku.ID); sold != 300 {
		t.Errorf("sold = %d; want 300", sold)
	}
}

func TestPlace_RedisKilledMidSaleFallsBackAndRecovers(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	dsn := testenv.Database(t)
	r := newRig(t, dsn, rigOptions{RedisAddr: srv.Addr})
	sku := wiringtest.CreateSKU(t, r.Store, 400, 1)

	var kill sync.Once
	results := wiringtest.Buyers(t, r.Orders, sku.ID, 1500, func(n int64) {
		if n == 50 {
			kill.Do(srv.Stop)
		}
	})
	if results["created"] != 400 {
		t.Errorf("created = %d; want 400 (results %v)", results["created"], results)
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 400 {
		t.Errorf("sold = %d; want 400", sold)
	}
	// A worker may finish the sale under a lease it already held
	// (lock.hold_max); the next acquisition finds Redis gone.
	probe := wiringtest.CreateSKU(t, r.Store, 1, 1)
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: probe.ID, UserID: "probe", Quantity: 1}); err != nil {
		t.Fatalf("Place with Redis down = %v; want an order (sold on the database guard)", err)
	}
	if !r.Orders.Degraded() {
		t.Errorf("Degraded() = false after Redis was killed; want true")
	}

	// Redis comes back: the next orders go through the lock again.
	srv.Start()
	more := wiringtest.CreateSKU(t, r.Store, 1000, 1)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; r.Orders.Degraded(); i++ {
		if time.Now().After(deadline) {
			t.Fatal("still degraded 10s after Redis came back")
		}
		if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: more.ID, UserID: fmt.Sprintf("r-%d", i), Quantity: 1}); err != nil {
			t.Fatalf("Place after recovery: %v", err)
		}
	}
	testenv.CheckInvariants(t, r.DB, more.ID)
}

func TestPlace_AbandonedWhileQueuedIsNotCharged(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	var g *wiringtest.GatedStore
	r := newRig(t, dsn, rigOptions{Commits: func(s engine.Committer) engine.Committer { g = wiringtest.Gate(s); return g }})
	sku := wiringtest.CreateSKU(t, r.Store, 10, 1)

	first := make(chan error, 1)
	go func() {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "first", Quantity: 1})
		first <- err
	}()
	wiringtest.Await(t, g.Entered, first, "the first order in its commit") // the worker is inside the first batch's transaction

	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := r.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "left", Quantity: 1})
		left <- err
	}()
	r.obs.waitDepth(t, 1)
	cancel()
	if err := <-left; !errors.Is(err, service.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Place(cancelled while queued) = %v; want ErrUnavailable wrapping context.Canceled", err)
	}
	close(g.Release)
	if err := <-first; err != nil {
		t.Fatalf("Place(first) = %v", err)
	}
	// A later batch must not charge the buyer who left.
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "later", Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	var charged int64
	r.DB.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ? AND user_id = 'left'", sku.ID).Scan(&charged)
	if charged != 0 {
		t.Errorf("the buyer who left has %d orders; want 0", charged)
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 2 {
		t.Errorf("sold = %d; want 2", sold)
	}
}

func TestPlace_FullQueueIsBusyAndShutdownAnswersEveryone(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	var g *wiringtest.GatedStore
	r := newRig(t, dsn, rigOptions{
		Commits: func(s engine.Committer) engine.Committer { g = wiringtest.Gate(s); return g },
		Engine:  func(c *engine.Config) { c.QueueMax = 5 },
	})
	sku := wiringtest.CreateSKU(t, r.Store, 100, 1)

	answers := make(chan error, 6)
	place := func(user string) {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: user, Quantity: 1})
		answers <- err
	}
	go place("first")
	wiringtest.Await(t, g.Entered, answers, "the first order in its commit")
	for i := range 5 {
		go place(fmt.Sprintf("queued-%d", i))
	}
	r.obs.waitDepth(t, 5)
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "one-too-many", Quantity: 1}); !errors.Is(err, service.ErrBusy) {
		t.Errorf("Place(queue full) = %v; want ErrBusy", err)
	}

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdown <- r.Seller.Shutdown(ctx)
	}()
	close(g.Release)
	for range 6 {
		if err := <-answers; err != nil {
			t.Errorf("queued request answered %v during shutdown; want an order", err)
		}
	}
	if err := <-shutdown; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "after", Quantity: 1}); !errors.Is(err, service.ErrUnavailable) {
		t.Errorf("Place after Shutdown = %v; want ErrUnavailable", err)
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 6 {
		t.Errorf("sold = %d; want 6", sold)
	}
}

func TestPlace_SoldOutFastPathSkipsTheDatabase(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	var g *wiringtest.GatedStore
	r := newRig(t, dsn, rigOptions{Commits: func(s engine.Committer) engine.Committer {
		g = wiringtest.Gate(s)
		close(g.Release) // no gate: only count
		return g
	}})
	sku := wiringtest.CreateSKU(t, r.Store, 1, 1)
	last, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "a", Quantity: 1, IdempotencyKey: "last-unit"})
	if err != nil {
		t.Fatal(err)
	}
	before := g.Commits.Load()
	for i := range 100 {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("b-%d", i), Quantity: 1})
		if !errors.Is(err, service.ErrSoldOut) {
			t.Fatalf("Place after sell-out = %v; want ErrSoldOut", err)
		}
	}
	if n := g.Commits.Load() - before; n != 0 {
		t.Errorf("100 sold-out rejects ran %d transactions; want 0", n)
	}
	// A retry of the last sale still finds its order.
	again, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "a", Quantity: 1, IdempotencyKey: "last-unit"})
	if err != nil || again.Created || again.Order.ID != last.Order.ID {
		t.Errorf("replay after sell-out = %+v, %v; want order %d, not created", again, err, last.Order.ID)
	}
	testenv.CheckInvariants(t, r.DB, sku.ID)
}

// countingLocker counts Obtain calls.
type countingLocker struct {
	engine.Locker
	n atomic.Int64
}

func (c *countingLocker) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	c.n.Add(1)
	return c.Locker.Obtain(ctx, key, rank)
}

// Ranks is false: each batch asks for the lock when it needs it.
func (c *countingLocker) Ranks() bool { return false }

func TestPlace_LockHeldByADeadHolderIsNotAwaitedTwice(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:orders:") + ":"
	counter := &countingLocker{}
	r := newRig(t, dsn, rigOptions{
		Prefix: prefix,
		Locker: func(l engine.Locker) engine.Locker { counter.Locker = l; return counter },
		Engine: func(c *engine.Config) {
			c.LockWait = 100 * time.Millisecond
			c.LockTTL = time.Minute
		},
	})
	sku := wiringtest.CreateSKU(t, r.Store, 10, 1)
	// A holder that died without releasing: its lease outlives the test.
	rdb, _ := testenv.Redis(t)
	// Through the service's own adapter, so it takes the service's key.
	dead, err := locking.NewRedisLocker(lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(time.Minute))).Obtain(context.Background(), fmt.Sprintf("sku:%d", sku.ID), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Release(context.Background()) })

	for i := range 5 {
		if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1}); err != nil {
			t.Fatalf("Place %d while the lock is held by a dead holder = %v; want an order", i, err)
		}
	}
	if n := counter.n.Load(); n != 1 {
		t.Errorf("Obtain called %d times for 5 sequential orders; want 1 (the SKU sells unlocked for a lease after a wait timeout)", n)
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 5 {
		t.Errorf("sold = %d; want 5", sold)
	}
}

func TestPlace_TenThousandBuyersAreBoundedByQueueMax(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	var g *wiringtest.GatedStore
	const queueMax = 500
	r := newRig(t, dsn, rigOptions{
		Commits: func(s engine.Committer) engine.Committer { g = wiringtest.Gate(s); return g },
		// The gate holds the first transaction for as long as the crowd
		// takes to arrive and be refused, which on a loaded box with -race
		// is longer than the production timeouts; what those timeouts do
		// has its own tests (QueuedPastTheRequestTimeoutIsNotCharged).
		Engine: func(c *engine.Config) {
			c.QueueMax, c.BatchMax = queueMax, 256
			c.RequestTimeout, c.TxTimeout = 2*time.Minute, 2*time.Minute
		},
	})
	sku := wiringtest.CreateSKU(t, r.Store, 100_000, 1)

	first := make(chan error, 1)
	go func() {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "first", Quantity: 1})
		first <- err
	}()
	wiringtest.Await(t, g.Entered, first, "the first order in its commit") // the worker holds one request in a transaction that does not end yet

	const buyers = 10_000
	var busy, placed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1})
			switch {
			case errors.Is(err, service.ErrBusy):
				busy.Add(1)
			case err == nil:
				placed.Add(1)
			default:
				t.Errorf("Place = %v; want an order or ErrBusy", err)
			}
		}()
	}
	close(start)
	r.obs.waitDepth(t, queueMax)
	// Everyone who did not fit was refused at once, while the queue is full:
	// what waits is bounded by queue_max, whatever the crowd.
	deadline := time.Now().Add(20 * time.Second)
	for busy.Load() < buyers-queueMax {
		if time.Now().After(deadline) {
			t.Fatalf("%d refused busy while the queue is full; want %d", busy.Load(), buyers-queueMax)
		}
		time.Sleep(5 * time.Millisecond) // polling counters, bounded above
	}
	close(g.Release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if busy.Load() != buyers-queueMax || placed.Load() != queueMax {
		t.Errorf("busy %d, placed %d; want %d and %d", busy.Load(), placed.Load(), buyers-queueMax, queueMax)
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != queueMax+1 {
		t.Errorf("sold = %d; want %d", sold, queueMax+1)
	}
}

func TestPlace_QueuedPastTheRequestTimeoutIsNotCharged(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	var g *wiringtest.GatedStore
	r := newRig(t, dsn, rigOptions{
		Commits: func(s engine.Committer) engine.Committer { g = wiringtest.Gate(s); return g },
		Engine:  func(c *engine.Config) { c.RequestTimeout = 200 * time.Millisecond },
	})
	sku := wiringtest.CreateSKU(t, r.Store, 10, 1)
	first := make(chan error, 1)
	go func() {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "first", Quantity: 1})
		first <- err
	}()
	wiringtest.Await(t, g.Entered, first, "the first order in its commit")
	late := make(chan error, 1)
	go func() {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "late", Quantity: 1})
		late <- err
	}()
	r.obs.waitDepth(t, 1)
	time.Sleep(300 * time.Millisecond) // the scenario: the late buyer's deadline passes while queued
	close(g.Release)
	if err := <-first; err != nil {
		t.Errorf("Place(in the batch already) = %v; want an order", err)
	}
	if err := <-late; !errors.Is(err, service.ErrUnavailable) {
		t.Errorf("Place(queued past its deadline) = %v; want ErrUnavailable", err)
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 1 {
		t.Errorf("sold = %d; want 1 (the late buyer is not charged)", sold)
	}
}

// busyLocker answers the first busy Obtain calls as a lock kept busy by
// live holders: each waits out its context (a whole lock.wait), then says
// ErrLockBusy. The calls after those go to the real Locker.
type busyLocker struct {
	engine.Locker
	busy  int64
	calls atomic.Int64
}

func (b *busyLocker) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	if b.calls.Add(1) <= b.busy {
		<-ctx.Done()
		return nil, fmt.Errorf("%w: renewed while we waited: %w", service.ErrLockBusy, ctx.Err())
	}
	return b.Locker.Obtain(ctx, key, rank)
}

// Ranks is false: each batch asks for the lock when it needs it.
func (b *busyLocker) Ranks() bool { return false }

// A lock that live holders keep busy is waited for, not sold beside: the
// batch commits under the lock once it is free (a fenced write), and the
// next orders still take the lock; a dead holder's SKU, by contrast, sells
// unlocked for a lease after one wait
// (TestPlace_LockHeldByADeadHolderIsNotAwaitedTwice).
func TestPlace_LockBusyWithLiveHoldersIsWaitedFor(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	locker := &busyLocker{busy: 2}
	fences := &staleStore{} // refusing none: it records each batch's fence
	r := newRig(t, dsn, rigOptions{
		Commits: func(s engine.Committer) engine.Committer { fences.Committer = s; return fences },
		Locker:  func(l engine.Locker) engine.Locker { locker.Locker = l; return locker },
		Engine:  func(c *engine.Config) { c.LockWait = 50 * time.Millisecond },
	})
	sku := wiringtest.CreateSKU(t, r.Store, 10, 1)
	for i := range 3 {
		if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1}); err != nil {
			t.Fatalf("Place %d = %v; want an order", i, err)
		}
		if n := locker.calls.Load(); i == 0 && n != 2+1 {
			t.Errorf("Obtain called %d times for the first order; want 3 (two busy waits, then the lock)", n)
		}
	}
	// Each next order obtains the lock, or finds it still held by the
	// worker (lock.hold_max) when it arrived before the worker let it go.
	fences.mu.Lock()
	seen := append([]int64(nil), fences.fences...)
	fences.mu.Unlock()
	for i, f := range seen {
		if f == 0 {
			t.Errorf("batch %d of %v sold without the lock; want every batch under it (busy is waited out, never skipped)", i, seen)
		}
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 3 {
		t.Errorf("sold = %d; want 3", sold)
	}
}

// sharingStore records, per batch, whether it was committed in a round
// and under which fence.
type sharingStore struct {
	engine.Committer
	mu      sync.Mutex
	batches []sharedBatch
}

type sharedBatch struct {
	sku, fence int64
	inRound    bool
}

func (s *sharingStore) record(b service.Batch, inRound bool) {
	s.mu.Lock()
	s.batches = append(s.batches, sharedBatch{sku: b.SKUID, fence: b.Fence, inRound: inRound})
	s.mu.Unlock()
}

func (s *sharingStore) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	s.record(b, false)
	return s.Committer.CommitBatch(ctx, b)
}

func (s *sharingStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	for _, b := range bs {
		s.record(b, true)
	}
	return s.Committer.CommitRound(ctx, bs)
}

// flakyLocker refuses every other Obtain as if Redis were unreachable.
type flakyLocker struct {
	engine.Locker
	n atomic.Int64
}

func (l *flakyLocker) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	if l.n.Add(1)%2 == 0 {
		return nil, fmt.Errorf("%w: refused by the test", service.ErrLockUnavailable)
	}
	return l.Locker.Obtain(ctx, key, rank)
}

// Ranks is false: each batch asks for the lock when it needs it.
func (l *flakyLocker) Ranks() bool { return false }

// A batch sold without the lock is never committed in a shared round
// (where waiting on another holder's row would hold up other SKUs), and
// one sold under it is; either way the sale is exact, and the orders sold
// without the lock are counted (SoldUnlocked).
func TestPlace_UnlockedBatchCommitsAlone(t *testing.T) {
	t.Parallel()
	var st *sharingStore
	r := newRig(t, testenv.Database(t), rigOptions{
		Commits: func(s engine.Committer) engine.Committer { st = &sharingStore{Committer: s}; return st },
		Locker:  func(l engine.Locker) engine.Locker { return &flakyLocker{Locker: l} },
		Engine:  func(c *engine.Config) { c.LockHold = 0 }, // a lock per batch: both kinds of batch
	})
	const stock, buyers = 10, 12
	sku := wiringtest.CreateSKU(t, r.Store, stock, 1)
	ctx := context.Background()
	var created atomic.Int64
	for i := range buyers { // one by one: a batch each, the first locked, the second not
		p, err := r.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u%d", i), Quantity: 1})
		if err == nil && p.Created {
			created.Add(1)
		} else if err != nil && !errors.Is(err, service.ErrSoldOut) {
			t.Errorf("Place = %v; want an order or sold out", err)
		}
	}
	if created.Load() != stock {
		t.Errorf("%d orders created; want %d", created.Load(), stock)
	}
	var locked, unlocked int
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, b := range st.batches {
		switch {
		case b.fence == 0 && b.inRound:
			t.Errorf("batch of sku %d sold without the lock was committed in a shared round", b.sku)
		case b.fence == 0:
			unlocked++
		case !b.inRound:
			t.Errorf("batch of sku %d under fence %d was not committed in a shared round", b.sku, b.fence)
		default:
			locked++
		}
	}
	if locked == 0 || unlocked == 0 {
		t.Errorf("%d locked and %d unlocked batches; the test needs both", locked, unlocked)
	}
	if got := r.obs.unlocked.Load(); got != int64(unlocked) { // one buyer a batch
		t.Errorf("SoldUnlocked counted %d orders; want %d, the buyers of the batches sold without the lock", got, unlocked)
	}
}
