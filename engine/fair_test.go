package engine_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// holdSKULock takes sku's lock as the rigs name it, so that every order
// queues until release is called.
func holdSKULock(t *testing.T, r *rig, sku int64) (release func()) {
	t.Helper()
	lc := lock.New(r.Redis, wiring.LockOptions(r.Settings)...)
	l, err := lc.Obtain(context.Background(), "{"+service.SKULockKey(sku)+"}")
	if err != nil {
		t.Fatalf("Obtain(sku %d's lock) = %v", sku, err)
	}
	return func() {
		if err := l.Release(context.Background()); err != nil {
			t.Errorf("Release = %v", err)
		}
	}
}

// sendSpread starts buyers distinct buyers ("b<k>", keyed by their name
// when keyed) of one unit of sku, round-robin over rigs, six every 3ms.
// wait waits for every answer, which answers then holds.
func sendSpread(ctx context.Context, rigs []*rig, sku int64, buyers int, keyed bool) (answers []error, wait func()) {
	answers = make([]error, buyers)
	var wg sync.WaitGroup
	for k := range buyers {
		if k%6 == 0 {
			time.Sleep(3 * time.Millisecond) // spreads the arrivals; nothing waits on it
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := service.OrderRequest{SKUID: sku, UserID: "b" + strconv.Itoa(k), Quantity: 1}
			if keyed {
				r.IdempotencyKey = r.UserID
			}
			_, answers[k] = rigs[k%len(rigs)].Orders.Place(ctx, r)
		}()
	}
	return answers, wg.Wait
}

// queuedArrivals waits until each of rigs has queued n buyers of sku and
// returns their arrivals by user, and the longest span of a turn's floor
// of one instance's arrivals.
func queuedArrivals(t *testing.T, rigs []*rig, sku int64, n int) (arrived map[string]int64, floorSpan int64) {
	t.Helper()
	arrived = map[string]int64{}
	for _, r := range rigs {
		r.obs.waitDepth(t, n)
		var mine []int64
		for u, a := range engine.QueuedArrivals(r.Seller, sku) {
			arrived[u] = a
			mine = append(mine, a)
		}
		slices.Sort(mine)
		for i := engine.TurnFloor - 1; i < len(mine); i++ {
			floorSpan = max(floorSpan, mine[i]-mine[i-engine.TurnFloor+1])
		}
	}
	return arrived, floorSpan
}

// Invariant 19: on three instances, production defaults, the units go to
// the earliest arrivals across every instance: no buyer wins who arrived
// more than the bound after the last buyer who should have won, and none
// loses who arrived more than the bound before it. The bound is
// order.fair_window, or the span of a turn's floor of one instance's
// arrivals when that is longer (docs/design.md). A sale in which a batch
// was sold without the lock (a ranked obtain timed out on a starved CPU)
// is degraded, where the invariant does not promise the order: it is
// sold again, on a new SKU, a bounded number of times.
func TestPlace_ThreeInstancesSellInArrivalOrder(t *testing.T) {
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:fair:") + ":"
	rigs := make([]*rig, 3)
	for i := range rigs {
		rigs[i] = newRig(t, dsn, rigOptions{Prefix: prefix})
	}
	const sales = 3
	for range sales {
		s := sellSpread(t, rigs)
		if s.unlocked > 0 {
			t.Logf("%d orders sold without the lock (degraded: no order promised); selling again", s.unlocked)
			continue
		}
		if s.won != s.units || s.late != 0 || s.early != 0 {
			t.Errorf("%d bought, %d late winners, %d early losers (bound %v); want %d, 0, 0", s.won, s.late, s.early, s.bound, s.units)
		}
		return
	}
	t.Errorf("each of %d sales sold orders without the lock: the fair path was never shown", sales)
}

// spreadSale is what sellSpread found.
type spreadSale struct {
	units, won, late, early int
	unlocked                int64 // orders sold without the lock, on every instance
	bound                   time.Duration
}

// sellSpread queues 1,200 buyers of a new SKU of 300 units over ~0.6s on
// rigs while the lock is held, then lets them sell, and counts who was
// served out of arrival order by more than the bound.
func sellSpread(t *testing.T, rigs []*rig) spreadSale {
	t.Helper()
	const units, buyers = 300, 1200
	sku := wiringtest.CreateSKU(t, rigs[0].Store, units, 1)
	release := holdSKULock(t, rigs[0], sku.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var unlocked int64
	for _, r := range rigs {
		unlocked -= r.obs.unlocked.Load()
	}
	// Arrivals over ~0.6s, far more than the bound, so that selling out
	// of order shows; nobody is sold meanwhile, since the lock is held.
	answers, wait := sendSpread(ctx, rigs, sku.ID, buyers, false)
	arrived, floorSpan := queuedArrivals(t, rigs, sku.ID, buyers/3)
	release() // every buyer is queued: the instances now sell
	wait()
	for _, r := range rigs {
		unlocked += r.obs.unlocked.Load()
	}
	if len(arrived) != buyers {
		t.Fatalf("%d buyers queued; want %d", len(arrived), buyers)
	}
	order := make([]int64, 0, buyers)
	for _, a := range arrived {
		order = append(order, a)
	}
	slices.Sort(order)
	bound := max(rigs[0].Settings.Order.FairWindow.Microseconds(), floorSpan)
	last := order[units-1]
	s := spreadSale{units: units, unlocked: unlocked, bound: time.Duration(bound) * time.Microsecond}
	for k, err := range answers {
		a := arrived["b"+strconv.Itoa(k)]
		switch {
		case err == nil:
			s.won++
			if a > last+bound {
				s.late++
			}
		case errors.Is(err, service.ErrSoldOut):
			if a < last-bound {
				s.early++
			}
		default:
			t.Errorf("buyer %d: Place = %v; want an order or ErrSoldOut", k, err)
		}
	}
	testenv.CheckInvariants(t, rigs[0].DB, sku.ID) // whatever the order, never oversold
	return s
}

// Invariant 19: a buyer told 429 busy on one instance who retries with the
// same Idempotency-Key on another keeps its first arrival there: it
// bumps the youngest buyer of a full queue and is sold before everyone
// who arrived after it.
func TestPlace_BuyerSentBackKeepsItsPlaceOnAnotherInstance(t *testing.T) {
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:fair:") + ":"
	queue := func(c *engine.Config) { c.QueueMax = 2 }
	a := newRig(t, dsn, rigOptions{Prefix: prefix, Engine: queue})
	b := newRig(t, dsn, rigOptions{Prefix: prefix, Engine: queue})
	sku := wiringtest.CreateSKU(t, a.Store, 3, 1)
	release := holdSKULock(t, a, sku.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type answer struct {
		user string
		err  error
	}
	answers := make(chan answer, 8)
	buy := func(r *rig, user, key string, depth int) {
		go func() {
			_, err := r.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: user, Quantity: 1, IdempotencyKey: key})
			answers <- answer{user, err}
		}()
		if depth > 0 {
			r.obs.waitDepth(t, depth)
		}
	}
	buy(a, "x1", "", 1)
	buy(a, "x2", "", 2)
	y := service.OrderRequest{SKUID: sku.ID, UserID: "y", Quantity: 1, IdempotencyKey: "y-key"}
	if _, err := a.Orders.Place(ctx, y); !errors.Is(err, service.ErrBusy) {
		t.Fatalf("Place(y, a full queue) = %v; want ErrBusy", err)
	}
	for i := 0; !engine.KnowsPlace(b.Seller, y); i++ { // shared through Redis; bounded: 5s
		if i == 500 {
			t.Fatal("instance b never heard y's place")
		}
		time.Sleep(10 * time.Millisecond)
	}
	buy(b, "z1", "", 1)
	buy(b, "z2", "z2-key", 2)
	buy(b, "y", "y-key", 0) // the retry, on another instance
	if got := <-answers; got.user != "z2" || !errors.Is(got.err, service.ErrBusy) {
		t.Fatalf("first answer: %s %v; want z2, the youngest, bumped with ErrBusy", got.user, got.err)
	}
	b.obs.waitDepth(t, 2)
	release()
	got := map[string]error{}
	for range 4 {
		an := <-answers
		got[an.user] = an.err
	}
	for _, u := range []string{"x1", "x2", "y"} {
		if got[u] != nil {
			t.Errorf("%s (among the 3 first arrivals) = %v; want an order", u, got[u])
		}
	}
	if !errors.Is(got["z1"], service.ErrSoldOut) {
		t.Errorf("z1 (arrived after y's first try) = %v; want ErrSoldOut", got["z1"])
	}
	testenv.CheckInvariants(t, a.DB, sku.ID)
}

// rankedCounter counts the leases its ranked locker grants.
type rankedCounter struct {
	engine.Locker
	obtained *atomic.Int64
}

func (c rankedCounter) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	l, err := c.Locker.Obtain(ctx, key, rank)
	if err == nil {
		c.obtained.Add(1)
	}
	return l, err
}

// Invariant 19, and a loser learns quickly: once an instance knows its SKU
// sold out, the buyers queued there are answered without the lock and
// without waiting for another instance's turn. Three instances with
// buyers queued behind a held lock sell 10 units; each takes the lock at
// most once: the first sells out, each other learns it from one batch,
// and nobody hands the lock over to refuse its losers.
func TestPlace_AfterASellOutNoInstanceWaitsForATurn(t *testing.T) {
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:fair:") + ":"
	var obtained atomic.Int64
	count := func(l engine.Locker) engine.Locker { return rankedCounter{l, &obtained} }
	rigs := make([]*rig, 3)
	for i := range rigs {
		rigs[i] = newRig(t, dsn, rigOptions{Prefix: prefix, Locker: count})
	}
	const units, buyers = 10, 600
	sku := wiringtest.CreateSKU(t, rigs[0].Store, units, 1)
	release := holdSKULock(t, rigs[0], sku.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Arrivals over ~0.3s, more than the window: a turn then ends within
	// each instance's queue.
	answers, wait := sendSpread(ctx, rigs, sku.ID, buyers, true)
	for _, r := range rigs {
		r.obs.waitDepth(t, buyers/3)
	}
	release()
	wait()
	var won, lost int
	for k, err := range answers {
		switch {
		case err == nil:
			won++
		case errors.Is(err, service.ErrSoldOut):
			lost++
		default:
			t.Errorf("buyer %d: Place = %v; want an order or ErrSoldOut", k, err)
		}
	}
	if won != units || lost != buyers-units {
		t.Errorf("%d bought, %d sold out; want %d, %d", won, lost, units, buyers-units)
	}
	if n := obtained.Load(); n > int64(len(rigs)) {
		t.Errorf("the lock was obtained %d times for one sell-out on %d instances; want at most once each", n, len(rigs))
	}
	testenv.CheckInvariants(t, rigs[0].DB, sku.ID)
}

// deafLocker ranks, but its leases do not hear who wants them (as with
// Redlock, or lock.wanted_notices off); it counts their Keeps.
type deafLocker struct {
	engine.Locker
	keeps *atomic.Int64
}

func (l deafLocker) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	lease, err := l.Locker.Obtain(ctx, key, rank)
	if err != nil {
		return nil, err
	}
	return deafLease{lease, l.keeps}, nil
}

type deafLease struct {
	engine.Lease
	keeps *atomic.Int64
}

// Keep is the wrapped lease's, counted.
func (l deafLease) Keep(ctx context.Context) (bool, error) {
	l.keeps.Add(1)
	return l.Lease.(engine.Handoff).Keep(ctx)
}

// Contender is the wrapped lease's.
func (l deafLease) Contender() (int64, bool) { return l.Lease.(engine.Handoff).Contender() }

// Wanting is nil: the lease does not hear who wants it.
func (deafLease) Wanting() <-chan struct{} { return nil }

// A holder that cannot hear who wants its lock does not keep it by age: it
// asks, as without fair selling, after each order.lock_hold (here 1ns: at
// every batch but a lease's first), so that another instance is not left
// to sell on the database guard alone.
func TestPlace_HolderDeafToContendersKeepsByLockHold(t *testing.T) {
	dsn := testenv.Database(t)
	var keeps atomic.Int64
	r := newRig(t, dsn, rigOptions{
		Locker: func(l engine.Locker) engine.Locker { return deafLocker{l, &keeps} },
		Engine: func(c *engine.Config) { c.LockHold = time.Nanosecond; c.BatchMax = 10 },
	})
	const buyers = 40
	sku := wiringtest.CreateSKU(t, r.Store, buyers, 1)
	release := holdSKULock(t, r, sku.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, buyers)
	for k := range buyers {
		go func() {
			_, err := r.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "b" + strconv.Itoa(k), Quantity: 1})
			errs <- err
		}()
	}
	r.obs.waitDepth(t, buyers)
	release()
	for range buyers {
		if err := <-errs; err != nil {
			t.Errorf("Place = %v; want an order", err)
		}
	}
	if keeps.Load() == 0 {
		t.Errorf("no Keep in %d batches of %d under a lease that hears nobody; want one per batch past the first", buyers/10, 10)
	}
	testenv.CheckInvariants(t, r.DB, sku.ID)
}
