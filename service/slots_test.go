package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// createSKUs creates n SKUs, the i-th as made by mk, and returns their ids.
func createSKUs(t *testing.T, store service.CatalogStore, n int, mk func(i int) service.SKU) []int64 {
	t.Helper()
	ids := make([]int64, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				now := time.Now().UTC()
				s := mk(i)
				s.Name, s.TotalStock, s.CreatedAt, s.UpdatedAt = "probe", s.Stock, now, now
				c, err := store.CreateSKU(context.Background(), s)
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = c.ID
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

// probe sends one order for each of ids (quantity q, a buyer each), 16 at
// a time, and counts the answers by result.
func probe(t *testing.T, o *service.Orders, ids []int64, q int64) map[string]int {
	t.Helper()
	var (
		mu      sync.Mutex
		results = map[string]int{}
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(ids); i = int(next.Add(1) - 1) {
				p, err := o.Place(context.Background(), service.OrderRequest{SKUID: ids[i], UserID: fmt.Sprintf("prober-%d", i), Quantity: q})
				mu.Lock()
				results[service.ResultOf(err, p.Created)]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return results
}

// sellsAll sends stock buyers at once for a SKU of that stock and fails
// unless every one gets an order.
func sellsAll(t *testing.T, r *rig, stock int64) {
	t.Helper()
	live := wiringtest.CreateSKU(t, r.Store, stock, 1)
	res := wiringtest.Buyers(t, r.Orders, live.ID, int(stock), nil)
	// buyers sends every tenth buyer twice: the repeat is refused its limit.
	if res["created"] != int(stock) {
		t.Errorf("live sku after the probes: %v; want %d created", res, stock)
	}
	if sold := testenv.CheckInvariants(t, r.DB, live.ID); sold != stock {
		t.Errorf("live sku sold %d; want %d", sold, stock)
	}
}

// TestPlace_ClosedSalesTakeNoSlot: more SKUs than order.max_live_skus
// whose sale has not started (or has ended), each probed once, are
// refused without a queue, and a live SKU still sells everything.
func TestPlace_ClosedSalesTakeNoSlot(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	r := newRig(t, dsn, rigOptions{})
	n := config.Default().Order.MaxLiveSKUs + 76
	later, began, ended := time.Now().Add(time.Hour).UTC(), time.Now().Add(-2*time.Hour).UTC(), time.Now().Add(-time.Hour).UTC()
	ids := createSKUs(t, r.Store, n, func(i int) service.SKU {
		if i%4 == 0 { // ended
			return service.SKU{Stock: 10, PerUserLimit: 1, StartsAt: &began, EndsAt: &ended}
		}
		return service.SKU{Stock: 10, PerUserLimit: 1, StartsAt: &later}
	})
	res := probe(t, r.Orders, ids, 1)
	if res["sale_not_active"] != n {
		t.Errorf("%d orders for skus whose sale is not on: %v; want %d sale_not_active", n, res, n)
	}
	if q := r.Seller.LiveQueues(); q != 0 {
		t.Errorf("%d sku queues after refusals that need no lock; want 0", q)
	}
	sellsAll(t, r, 10)
}

// TestPlace_RefusalFloodDoesNotDenyALiveSKU: a flood of orders that the
// transaction refuses (limit_exceeded, insufficient_stock) over more SKUs
// than order.max_live_skus leaves every refused SKU's queue idle; a live
// SKU still gets a queue and sells everything. Queues do not idle out
// during the test (order.idle_timeout of an hour): the flood comes faster
// than they would.
func TestPlace_RefusalFloodDoesNotDenyALiveSKU(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	r := newRig(t, dsn, rigOptions{Engine: func(c *engine.Config) { c.IdleTimeout = time.Hour }})
	n := config.Default().Order.MaxLiveSKUs + 76
	ids := createSKUs(t, r.Store, n, func(i int) service.SKU {
		if i%2 == 0 {
			return service.SKU{Stock: 10, PerUserLimit: 1} // 2 units: over the limit
		}
		return service.SKU{Stock: 1, PerUserLimit: 3} // 2 units: more than left
	})
	res := probe(t, r.Orders, ids, 2)
	if res["limit_exceeded"] != (n+1)/2 || res["insufficient_stock"] != n/2 {
		t.Errorf("%d refused orders: %v; want %d limit_exceeded, %d insufficient_stock", n, res, (n+1)/2, n/2)
	}
	sellsAll(t, r, 10)
	if q, max := r.Seller.LiveQueues(), config.Default().Order.MaxLiveSKUs; q > max {
		t.Errorf("%d sku queues; want at most %d", q, max)
	}
	for _, id := range ids[:10] {
		if sold := testenv.CheckInvariants(t, r.DB, id); sold != 0 {
			t.Errorf("sku %d sold %d to refused orders; want 0", id, sold)
		}
	}
}

// TestPlace_SaleWindowChangeSeen: a sale that has not started is refused
// from the window an instance holds, but a window opened by an admin is
// honoured at once through the instance that changed it and, through
// another, as soon as the held window is older than sold_out.recheck.
func TestPlace_SaleWindowChangeSeen(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:window:") + ":"
	a := newRig(t, dsn, rigOptions{Prefix: prefix})
	b := newRig(t, dsn, rigOptions{Prefix: prefix})
	ctx := context.Background()
	later := time.Now().Add(time.Hour).UTC()
	sku := createSKUs(t, a.Store, 1, func(int) service.SKU { return service.SKU{Stock: 5, PerUserLimit: 1, StartsAt: &later} })[0]
	for _, r := range []*rig{a, b} {
		if _, err := r.Orders.Place(ctx, service.OrderRequest{SKUID: sku, UserID: "early", Quantity: 1}); !errors.Is(err, service.ErrSaleNotActive) {
			t.Fatalf("Place before the start = %v; want ErrSaleNotActive", err)
		}
	}
	now := time.Now().Add(-time.Minute).UTC()
	if _, err := a.Catalog.Update(ctx, sku, service.SKUChange{StartsAt: service.OptionalTime{Set: true, Time: &now}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Orders.Place(ctx, service.OrderRequest{SKUID: sku, UserID: "on-a", Quantity: 1}); err != nil {
		t.Errorf("Place on A after A opened the sale = %v; want an order", err)
	}
	service.AgeSaleWindow(b.SKUs, sku, config.Default().SoldOut.Recheck)
	if _, err := b.Orders.Place(ctx, service.OrderRequest{SKUID: sku, UserID: "on-b", Quantity: 1}); err != nil {
		t.Errorf("Place on B past sold_out.recheck after A opened the sale = %v; want an order", err)
	}
	if sold := testenv.CheckInvariants(t, a.DB, sku); sold != 2 {
		t.Errorf("sold = %d; want 2", sold)
	}
}
