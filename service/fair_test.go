package service_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// holdSKULock takes sku's lock as the rigs name it, so that every order
// queues until release is called.
func holdSKULock(t *testing.T, r *rig, sku int64) (release func()) {
	t.Helper()
	lc := lock.New(r.rdb, app.LockOptions(r.pc)...)
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

// Invariant 19: on three instances, production defaults, the units go to
// the earliest arrivals across every instance: no buyer wins who arrived
// more than order.fair_window after the last buyer who should have won,
// and none loses who arrived more than that before it.
func TestPlace_ThreeInstancesSellInArrivalOrder(t *testing.T) {
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:fair:") + ":"
	rigs := make([]*rig, 3)
	for i := range rigs {
		rigs[i] = newRig(t, dsn, rigOptions{prefix: prefix})
	}
	const units, buyers = 300, 1200
	sku := createSKU(t, rigs[0].store, units, 1)
	release := holdSKULock(t, rigs[0], sku.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	answers := make([]error, buyers)
	var wg sync.WaitGroup
	for k := range buyers {
		if k%6 == 0 {
			// Spread the arrivals over ~0.6s, far more than the bound,
			// so that selling out of order shows; nobody is sold
			// meanwhile, since the lock is held.
			time.Sleep(3 * time.Millisecond)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, answers[k] = rigs[k%3].orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "b" + strconv.Itoa(k), Quantity: 1})
		}()
	}
	arrived := map[string]int64{}
	for _, r := range rigs {
		r.obs.waitDepth(t, buyers/3)
		for u, a := range service.QueuedArrivals(r.orders, sku.ID) {
			arrived[u] = a
		}
	}
	release() // every buyer is queued: the instances now sell
	wg.Wait()
	if len(arrived) != buyers {
		t.Fatalf("%d buyers queued; want %d", len(arrived), buyers)
	}
	order := make([]int64, 0, buyers)
	for _, a := range arrived {
		order = append(order, a)
	}
	slices.Sort(order)
	bound := rigs[0].pc.Order.FairWindow.Microseconds()
	last := order[units-1]
	var won, late, early int
	for k, err := range answers {
		a := arrived["b"+strconv.Itoa(k)]
		switch {
		case err == nil:
			won++
			if a > last+bound {
				late++
			}
		case errors.Is(err, service.ErrSoldOut):
			if a < last-bound {
				early++
			}
		default:
			t.Errorf("buyer %d: Place = %v; want an order or ErrSoldOut", k, err)
		}
	}
	if won != units || late != 0 || early != 0 {
		t.Errorf("%d bought, %d late winners, %d early losers (bound %v); want %d, 0, 0", won, late, early, rigs[0].pc.Order.FairWindow, units)
	}
	testenv.CheckInvariants(t, rigs[0].db, sku.ID)
}

// Invariant 19: a buyer told 429 busy on one instance who retries with the
// same Idempotency-Key on another keeps its first arrival there: it
// bumps the youngest buyer of a full queue and is sold before everyone
// who arrived after it.
func TestPlace_BuyerSentBackKeepsItsPlaceOnAnotherInstance(t *testing.T) {
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:fair:") + ":"
	queue := func(c *service.OrdersConfig) { c.QueueMax = 2 }
	a := newRig(t, dsn, rigOptions{prefix: prefix, cfg: queue})
	b := newRig(t, dsn, rigOptions{prefix: prefix, cfg: queue})
	sku := createSKU(t, a.store, 3, 1)
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
			_, err := r.orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: user, Quantity: 1, IdempotencyKey: key})
			answers <- answer{user, err}
		}()
		if depth > 0 {
			r.obs.waitDepth(t, depth)
		}
	}
	buy(a, "x1", "", 1)
	buy(a, "x2", "", 2)
	y := service.OrderRequest{SKUID: sku.ID, UserID: "y", Quantity: 1, IdempotencyKey: "y-key"}
	if _, err := a.orders.Place(ctx, y); !errors.Is(err, service.ErrBusy) {
		t.Fatalf("Place(y, a full queue) = %v; want ErrBusy", err)
	}
	for i := 0; !service.KnowsPlace(b.orders, y); i++ { // shared through Redis; bounded: 5s
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
	testenv.CheckInvariants(t, a.db, sku.ID)
}
