package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// leaseLog records every lease the order path obtains and releases, in order.
type leaseLog struct {
	engine.Locker
	deaf   bool // its leases do not say when they are wanted, as ZooKeeper's
	mu     sync.Mutex
	events []string // "obtain <fence>", "keep <fence>", "release <fence>"
}

func (l *leaseLog) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	lease, err := l.Locker.Obtain(ctx, key, rank)
	if err != nil {
		return nil, err
	}
	l.add("obtain", lease.Fence())
	return loggedLease{lease, l}, nil
}

// Ranks is false: the tests of the log hold leases by lock.hold_max, as
// a holder that cannot hand its lease over by rank does.
func (l *leaseLog) Ranks() bool { return false }

func (l *leaseLog) add(what string, fence int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, what+" "+strconv.FormatInt(fence, 10))
}

func (l *leaseLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

type loggedLease struct {
	engine.Lease
	log *leaseLog
}

func (l loggedLease) Release(ctx context.Context) error {
	l.log.add("release", l.Fence())
	return l.Lease.Release(ctx)
}

// Wanting is the wrapped lease's, unless the log is deaf.
func (l loggedLease) Wanting() <-chan struct{} {
	if l.log.deaf {
		return nil
	}
	return l.Lease.(engine.Handoff).Wanting()
}

// Keep logs "keep" when the lease was kept, else "release" (lock.Lock.Keep
// lets it go then).
func (l loggedLease) Keep(ctx context.Context) (bool, error) {
	kept, err := l.Lease.(engine.Handoff).Keep(ctx)
	if kept {
		l.log.add("keep", l.Fence())
	} else {
		l.log.add("release", l.Fence())
	}
	return kept, err
}

// Contender is the wrapped lease's.
func (l loggedLease) Contender() (int64, bool) { return l.Lease.(engine.Handoff).Contender() }

// staleStore refuses the first n batches as the database does when the
// row's fence moved past the batch's, recording the fences it saw, the
// known rows the batches brought and the rows their commits left.
type staleStore struct {
	engine.Committer
	n      atomic.Int64
	mu     sync.Mutex
	fences []int64
	known  []*service.SKU
	left   []*service.SKU // nil for a batch that failed
}

func (s *staleStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, s.CommitBatch)
}

func (s *staleStore) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	s.mu.Lock()
	s.fences = append(s.fences, b.Fence)
	s.known = append(s.known, b.Known)
	s.mu.Unlock()
	var (
		res service.BatchResult
		err = fmt.Errorf("fence %d refused: %w", b.Fence, service.ErrStaleFence)
	)
	if s.n.Add(-1) < 0 {
		res, err = s.Committer.CommitBatch(ctx, b)
	}
	var left *service.SKU
	if err == nil {
		left = &res.SKU
	}
	s.mu.Lock()
	s.left = append(s.left, left)
	s.mu.Unlock()
	return res, err
}

func TestPlace_StaleFenceDropsTheLeaseAndObtainsAnother(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		stale   int64
		want    error // nil: an order
		commits int
	}{
		{name: "once", stale: 1, commits: 2},
		{name: "every time", stale: 1 << 30, want: service.ErrUnavailable, commits: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := testenv.Database(t)
			store := &staleStore{}
			store.n.Store(tc.stale)
			leases := &leaseLog{}
			r := newRig(t, dsn, rigOptions{
				Commits: func(s engine.Committer) engine.Committer { store.Committer = s; return store },
				Locker:  func(l engine.Locker) engine.Locker { leases.Locker = l; return leases },
			})
			sku := wiringtest.CreateSKU(t, r.Store, 5, 1)
			_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "u", Quantity: 1})
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Place = %v; want %v", err, tc.want)
			}
			store.mu.Lock()
			fences := append([]int64(nil), store.fences...)
			store.mu.Unlock()
			if len(fences) != tc.commits {
				t.Errorf("%d commits (fences %v); want %d: a stale fence is never retried under the same lease", len(fences), fences, tc.commits)
			}
			for i := 1; i < len(fences); i++ {
				if fences[i] <= fences[i-1] {
					t.Errorf("commit %d used fence %d after %d; want a new lease's, greater", i, fences[i], fences[i-1])
				}
			}
			// Every refused lease was released before the next was obtained.
			events := leases.list()
			for i, f := range fences[:len(fences)-1] {
				want := []string{"obtain " + strconv.FormatInt(f, 10), "release " + strconv.FormatInt(f, 10)}
				if 2*i+1 >= len(events) || events[2*i] != want[0] || events[2*i+1] != want[1] {
					t.Errorf("lease events %v; want %v at %d", events, want, 2*i)
					break
				}
			}
			wantSold := int64(1)
			if tc.want != nil {
				wantSold = 0
			}
			if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != wantSold {
				t.Errorf("sold = %d; want %d", sold, wantSold)
			}
		})
	}
}

// lossStore holds the first batch until its ctx ends, recording why.
type lossStore struct {
	engine.Committer
	entered chan service.Batch
	ended   chan error
	once    sync.Once
}

func (s *lossStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, s.CommitBatch)
}

func (s *lossStore) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	first := false
	s.once.Do(func() { first = true })
	if first {
		s.entered <- b
		<-ctx.Done()
		s.ended <- ctx.Err()
	}
	return s.Committer.CommitBatch(ctx, b)
}

// TestPlace_LeaseLostMidBatchCancelsIt: the lease vanishes from Redis (an
// expiry, a failover) while its batch is in the transaction. The watchdog
// (on by default) finds it gone and cancels the batch; the lease is
// released, the buyer's answer is true (503 and uncharged, or the order
// if the store had committed it), and the next buyer sells under a new
// lease.
func TestPlace_LeaseLostMidBatchCancelsIt(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	store := &lossStore{entered: make(chan service.Batch, 1), ended: make(chan error, 1)}
	leases := &leaseLog{}
	r := newRig(t, dsn, rigOptions{
		Commits: func(s engine.Committer) engine.Committer { store.Committer = s; return store },
		Locker:  func(l engine.Locker) engine.Locker { leases.Locker = l; return leases },
	})
	sku := wiringtest.CreateSKU(t, r.Store, 5, 1)
	first := make(chan error, 1)
	go func() {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "lost", Quantity: 1})
		first <- err
	}()
	b := <-store.entered
	if b.Fence == 0 {
		t.Fatal("the batch runs without a lease; want one")
	}
	n, err := r.Redis.Del(context.Background(), r.Prefix+"{sku:"+strconv.FormatInt(sku.ID, 10)+"}").Result()
	if err != nil || n != 1 {
		t.Fatalf("deleting the lease = %d, %v; want 1 key", n, err)
	}
	if err := <-store.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the batch's ctx ended with %v; want context.Canceled (the lease was lost), not its deadline", err)
	}
	// The answer is true either way: 503 uncharged, or (when the store
	// had already committed it) the order.
	firstErr := <-first
	if firstErr != nil && !errors.Is(firstErr, service.ErrUnavailable) {
		t.Errorf("Place under a lost lease = %v; want an order or ErrUnavailable", firstErr)
	}
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "next", Quantity: 1}); err != nil {
		t.Fatalf("Place after the loss = %v; want an order", err)
	}
	var charged int64
	r.DB.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ? AND user_id = 'lost'", sku.ID).Scan(&charged)
	if want := map[bool]int64{true: 1, false: 0}[firstErr == nil]; charged != want {
		t.Errorf("the buyer told %v has %d orders; want %d", firstErr, charged, want)
	}
	wantSold := 1 + charged
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != wantSold {
		t.Errorf("sold = %d; want %d", sold, wantSold)
	}
	if ev := leases.list(); len(ev) < 3 || ev[0] != "obtain "+strconv.FormatInt(b.Fence, 10) || ev[1] != "release "+strconv.FormatInt(b.Fence, 10) {
		t.Errorf("lease events %v; want the lost lease obtained, released, then a new one", ev)
	}
}

// TestPlace_BusyWorkerHoldsItsLeaseAcrossBatches: a worker with a queue
// behind its batch keeps the lease (lock.hold_max) and commits the next
// batches under the same fence, which the database accepts; two
// instances still sell exactly the stock.
func TestPlace_BusyWorkerHoldsItsLeaseAcrossBatches(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	var g *wiringtest.GatedStore
	fences := &staleStore{} // refusing none: it only records the fences
	prefix := testenv.Name("test:orders:") + ":"
	r := newRig(t, dsn, rigOptions{
		Prefix: prefix,
		Commits: func(s engine.Committer) engine.Committer {
			fences.Committer = s
			g = wiringtest.Gate(fences)
			return g
		},
		// Long enough that the hold, not the clock, decides under CPU load.
		Engine: func(c *engine.Config) { c.LockHold = time.Minute; c.BatchMax = 10 },
	})
	other := newRig(t, dsn, rigOptions{Prefix: prefix})
	sku := wiringtest.CreateSKU(t, r.Store, 100, 1)

	first := make(chan error, 1)
	go func() {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "first", Quantity: 1})
		first <- err
	}()
	wiringtest.Await(t, g.Entered, first, "the first order in its commit")
	var wg sync.WaitGroup
	var created atomic.Int64
	for i := range 30 { // three batches queued behind the first
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1}); err != nil {
				t.Errorf("Place = %v; want an order", err)
			} else {
				created.Add(1)
			}
		}()
	}
	r.obs.waitDepth(t, 30)
	// Meanwhile another instance contends for the same SKU.
	var otherResults map[string]int
	wg.Add(1)
	go func() { defer wg.Done(); otherResults = wiringtest.Buyers(t, other.Orders, sku.ID, 50, nil) }()
	close(g.Release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	fences.mu.Lock()
	seen := append([]int64(nil), fences.fences...)
	fences.mu.Unlock()
	if len(seen) < 4 || seen[0] == 0 || seen[1] != seen[0] || seen[2] != seen[0] || seen[3] != seen[0] {
		t.Errorf("fences of the first batches %v; want four batches under one lease (lock.hold_max)", seen)
	}
	// The first batch of a lease reads the SKU; each next one under the
	// same lease brings the row as the batch before it left it.
	fences.mu.Lock()
	known, left := fences.known[:4], fences.left[:4]
	fences.mu.Unlock()
	if known[0] != nil {
		t.Errorf("the lease's first batch brought a known row %+v; want none", *known[0])
	}
	for i := 1; i < 4; i++ {
		if known[i] == nil || left[i-1] == nil || *known[i] != *left[i-1] {
			t.Errorf("batch %d brought the known row %v; want the row batch %d left, %v", i, known[i], i-1, left[i-1])
		}
	}
	want := 1 + 30 + otherResults["created"]
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != int64(want) {
		t.Errorf("sold = %d; want %d (31 here, %d on the other instance: %v)", sold, want, otherResults["created"], otherResults)
	}
}

// TestPlace_IdleWorkerKeepsItsLeaseForTheNextOrder: a worker whose queue
// emptied keeps its lease for the next order (lock.hold_idle), which is
// sold under the same fence on the row the last batch left, without
// reading it; Shutdown lets the lease go.
func TestPlace_IdleWorkerKeepsItsLeaseForTheNextOrder(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	store := &staleStore{} // refusing none: it records fences and rows
	leases := &leaseLog{}
	r := newRig(t, dsn, rigOptions{
		Commits: func(s engine.Committer) engine.Committer { store.Committer = s; return store },
		Locker:  func(l engine.Locker) engine.Locker { leases.Locker = l; return leases },
		// Long enough that the idle hold, not the clock, decides under load.
		Engine: func(c *engine.Config) { c.LockHold = time.Minute; c.LockHoldIdle = time.Minute },
	})
	sku := wiringtest.CreateSKU(t, r.Store, 10, 1)
	for i := range 3 {
		if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1}); err != nil {
			t.Fatalf("Place #%d = %v; want an order", i, err)
		}
	}
	store.mu.Lock()
	fences, known, left := store.fences, store.known, store.left
	store.mu.Unlock()
	if len(fences) != 3 || fences[0] == 0 || fences[1] != fences[0] || fences[2] != fences[0] {
		t.Fatalf("fences %v; want three batches under one lease", fences)
	}
	for i := 1; i < 3; i++ {
		if known[i] == nil || left[i-1] == nil || *known[i] != *left[i-1] {
			t.Errorf("batch %d brought the known row %v; want the row batch %d left, %v", i, known[i], i-1, left[i-1])
		}
	}
	f := strconv.FormatInt(fences[0], 10)
	if ev := leases.list(); len(ev) != 1 || ev[0] != "obtain "+f {
		t.Errorf("lease events while idle %v; want only [obtain %s]: the lease held for the next order", ev, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Seller.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := leases.list(); len(ev) != 2 || ev[1] != "release "+f {
		t.Errorf("lease events after Shutdown %v; want [obtain %s release %s]", ev, f, f)
	}
	if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 3 {
		t.Errorf("sold = %d; want 3", sold)
	}
}

// TestPlace_IdleHolderLetsAnotherInstanceIn: a worker holding its lease
// while idle (lock.hold_idle) lets it go once another instance wants the
// SKU, which then sells under its own, newer fence rather than on the
// database guard alone: at once when the lease hears it (the lock's wanted
// notices), else at its next lock.hold_max, when Keep finds the key wanted
// (before that, each Keep keeps it).
func TestPlace_IdleHolderLetsAnotherInstanceIn(t *testing.T) {
	t.Parallel()
	for _, deaf := range []bool{false, true} {
		t.Run(map[bool]string{false: "wanted notice", true: "keep"}[deaf], func(t *testing.T) {
			t.Parallel()
			dsn := testenv.Database(t)
			prefix := testenv.Name("test:orders:") + ":"
			idle := func(c *engine.Config) { c.LockHoldIdle = time.Minute } // production's lock.hold_max
			leases := &leaseLog{deaf: deaf}
			a := newRig(t, dsn, rigOptions{
				Prefix: prefix, Engine: idle,
				Locker: func(l engine.Locker) engine.Locker { leases.Locker = l; return leases },
			})
			bStore := &staleStore{}
			b := newRig(t, dsn, rigOptions{
				Prefix: prefix, Engine: idle,
				Commits: func(s engine.Committer) engine.Committer { bStore.Committer = s; return bStore },
			})
			sku := wiringtest.CreateSKU(t, a.Store, 10, 1)
			if _, err := a.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "a", Quantity: 1}); err != nil {
				t.Fatal(err)
			}
			ev := leases.list()
			if len(ev) < 1 || !strings.HasPrefix(ev[0], "obtain ") {
				t.Fatalf("lease events of the idle holder %v; want an obtain first", ev)
			}
			fenceA, _ := strconv.ParseInt(strings.TrimPrefix(ev[0], "obtain "), 10, 64)
			if _, err := b.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "b", Quantity: 1}); err != nil {
				t.Fatalf("the other instance's Place = %v; want an order", err)
			}
			bStore.mu.Lock()
			fencesB := append([]int64(nil), bStore.fences...)
			bStore.mu.Unlock()
			if len(fencesB) != 1 || fencesB[0] <= fenceA {
				t.Errorf("the other instance's batch ran with fences %v; want one, under a lease newer than the idle holder's %d", fencesB, fenceA)
			}
			ev = leases.list()
			f := strconv.FormatInt(fenceA, 10)
			for i, e := range ev {
				want := "keep " + f // deaf: kept at each hold_max while nobody wanted it
				switch i {
				case 0:
					want = "obtain " + f
				case len(ev) - 1:
					want = "release " + f
				}
				if e != want || !deaf && len(ev) != 2 {
					t.Errorf("lease events of the idle holder %v; want obtain, keeps (only without notices), release of fence %d", ev, fenceA)
					break
				}
			}
			if sold := testenv.CheckInvariants(t, a.DB, sku.ID); sold != 2 {
				t.Errorf("sold = %d; want 2", sold)
			}
		})
	}
}
