package repository_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

// window is the payment window of the lifecycle tests' orders: their
// transitions are given explicit times around created + window, so no
// test waits for a clock.
const window = time.Minute

// pendingOrders places one pending order per user (quantity 1), created at
// at, and returns them in user order.
func pendingOrders(t *testing.T, s store, skuID int64, at time.Time, users ...string) []service.Order {
	t.Helper()
	b := batch(skuID, 0, users...)
	b.Now, b.PaymentTimeout = at, window
	res, err := s.CommitBatch(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]service.Order, len(res.Outcomes))
	for i, o := range res.Outcomes {
		if o.Err != nil {
			t.Fatalf("order of %s: %v", users[i], o.Err)
		}
		if o.Placed.Order.Status != service.OrderPending || o.Placed.Order.ExpiresAt == nil {
			t.Fatalf("new order = %+v; want pending with expires_at", o.Placed.Order)
		}
		out[i] = o.Placed.Order
	}
	return out
}

func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// statusCounts reads how many orders of a SKU are in each status and the
// units of the live ones, and checks the invariants: stock + sold ==
// total, sold == pending + paid units, holdings == live orders.
func statusCounts(t *testing.T, db *gorm.DB, skuID int64) map[service.OrderStatus]int64 {
	t.Helper()
	testenv.CheckInvariants(t, db, skuID)
	var rows []struct {
		Status string
		N      int64
	}
	if err := db.Raw("SELECT status, COUNT(*) AS n FROM orders WHERE sku_id = ? GROUP BY status", skuID).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[service.OrderStatus]int64{}
	for _, r := range rows {
		out[service.OrderStatus(r.Status)] = r.N
	}
	return out
}

func orderStatus(t *testing.T, s store, id int64) service.OrderStatus {
	t.Helper()
	o, err := s.Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return o.Status
}

// TestPayVersusExpiry_SameInstant pays every order 1µs before its
// expires_at while sweepers expire them at expires_at, all released at
// once: each order is either paid (the payment answered, the unit kept) or
// expired (the payment refused with ErrOrderExpired, the unit returned
// once), never both, and the sweeps return exactly the expired units.
func TestPayVersusExpiry_SameInstant(t *testing.T) {
	t.Parallel()
	const n = 120
	db, s, sku := setup(t, n, 1)
	created := time.Now().UTC().Truncate(time.Microsecond)
	orders := pendingOrders(t, s, sku.ID, created, users("u", n)...)
	due := created.Add(window)

	ctx := context.Background()
	start := make(chan struct{})
	payErrs := make([]error, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		returned int64
	)
	for i, o := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// A deadlock with a sweeper rolls the payment back as
			// ErrConflict, and the service retries it: so does the test,
			// a bounded number of times, still 1 µs before the deadline.
			for range 50 {
				_, payErrs[i] = s.PayOrder(ctx, o.ID, due.Add(-time.Microsecond))
				if !errors.Is(payErrs[i], service.ErrConflict) {
					break
				}
			}
		}()
	}
	for range 4 { // unfenced sweepers: the status guard alone keeps each return single
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range n { // bounded: each sweep expires at least one order or finds none due
				ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: due, Limit: 16})
				if err != nil && !errors.Is(err, service.ErrConflict) {
					t.Errorf("ExpireDue: %v", err)
					return
				}
				mu.Lock()
				returned += ex.Units
				mu.Unlock()
				if err == nil && ex.Orders == 0 {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	// Whatever a sweeper left (its last sweep may have met a deadlock).
	for {
		ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: due, Limit: n})
		if err != nil {
			t.Fatal(err)
		}
		returned += ex.Units
		if ex.Orders == 0 {
			break
		}
	}

	var paid, expired int64
	for i, o := range orders {
		st := orderStatus(t, s, o.ID)
		switch {
		case payErrs[i] == nil && st == service.OrderPaid:
			paid++
		case errors.Is(payErrs[i], service.ErrOrderExpired) && st == service.OrderExpired:
			expired++
		default:
			t.Errorf("order %d: payment answered %v, status %s", o.ID, payErrs[i], st)
		}
	}
	counts := statusCounts(t, db, sku.ID)
	if counts[service.OrderPaid] != paid || counts[service.OrderExpired] != expired || paid+expired != n {
		t.Errorf("statuses %v; payments say %d paid, %d expired of %d", counts, paid, expired, n)
	}
	if returned != expired {
		t.Errorf("the sweeps returned %d units; %d orders expired", returned, expired)
	}
	got, _ := s.SKU(ctx, sku.ID)
	if got.Stock != expired || got.Sold != paid {
		t.Errorf("stock %d, sold %d; want %d returned, %d sold", got.Stock, got.Sold, expired, paid)
	}
	t.Logf("%d paid, %d expired", paid, expired)
}

// TestCancelVersusPay cancels and pays every order at once: each ends
// either paid (the cancel refused with ErrOrderPaid) or cancelled (the
// payment refused with ErrOrderCancelled, the unit returned once).
func TestCancelVersusPay(t *testing.T) {
	t.Parallel()
	const n = 120
	db, s, sku := setup(t, n, 1)
	created := time.Now().UTC().Truncate(time.Microsecond)
	buyers := users("c", n)
	orders := pendingOrders(t, s, sku.ID, created, buyers...)
	at := created.Add(window / 2)

	ctx := context.Background()
	start := make(chan struct{})
	payErrs, cancelErrs := make([]error, n), make([]error, n)
	returned := make([]bool, n)
	var wg sync.WaitGroup
	for i, o := range orders {
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			for range 50 { // a deadlock is retried, as the service does
				_, payErrs[i] = s.PayOrder(ctx, o.ID, at)
				if !errors.Is(payErrs[i], service.ErrConflict) {
					break
				}
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			for range 50 {
				st, err := s.CancelOrder(ctx, o.ID, buyers[i], at)
				cancelErrs[i], returned[i] = err, st.Returned != nil
				if !errors.Is(err, service.ErrConflict) {
					break
				}
			}
		}()
	}
	close(start)
	wg.Wait()

	var paid, cancelled int64
	for i, o := range orders {
		st := orderStatus(t, s, o.ID)
		switch {
		case payErrs[i] == nil && errors.Is(cancelErrs[i], service.ErrOrderPaid) && st == service.OrderPaid && !returned[i]:
			paid++
		case cancelErrs[i] == nil && errors.Is(payErrs[i], service.ErrOrderCancelled) && st == service.OrderCancelled && returned[i]:
			cancelled++
		default:
			t.Errorf("order %d: payment %v, cancel %v (returned %v), status %s", o.ID, payErrs[i], cancelErrs[i], returned[i], st)
		}
	}
	counts := statusCounts(t, db, sku.ID)
	if counts[service.OrderPaid] != paid || counts[service.OrderCancelled] != cancelled {
		t.Errorf("statuses %v; answers say %d paid, %d cancelled", counts, paid, cancelled)
	}
	got, _ := s.SKU(ctx, sku.ID)
	if got.Stock != cancelled {
		t.Errorf("stock %d; want the %d cancelled units back", got.Stock, cancelled)
	}
	t.Logf("%d paid, %d cancelled", paid, cancelled)
}

// TestLifecycle_Transitions walks one order through each path on both
// databases: idempotent repeats, refusals that change nothing, someone
// else's cancel, and the quota a returned unit frees.
func TestLifecycle_Transitions(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			_, s := be.open(t)
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Microsecond)
			sku, err := s.CreateSKU(ctx, service.SKU{Name: "t", TotalStock: 3, Stock: 3, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			placed := pendingOrders(t, s, sku.ID, now, "payer", "canceller", "sleeper")
			payer, canceller, sleeper := placed[0], placed[1], placed[2]
			in := now.Add(time.Second)

			if st, err := s.PayOrder(ctx, payer.ID, in); err != nil || !st.Changed || st.Order.Status != service.OrderPaid {
				t.Errorf("PayOrder = %+v, %v; want changed to paid", st, err)
			}
			if st, err := s.PayOrder(ctx, payer.ID, in); err != nil || st.Changed || st.Order.Status != service.OrderPaid {
				t.Errorf("PayOrder again = %+v, %v; want paid, unchanged", st, err)
			}
			if _, err := s.CancelOrder(ctx, payer.ID, "payer", in); !errors.Is(err, service.ErrOrderPaid) {
				t.Errorf("CancelOrder(paid) = %v; want ErrOrderPaid", err)
			}
			if _, err := s.CancelOrder(ctx, canceller.ID, "someone-else", in); !errors.Is(err, service.ErrNotFound) {
				t.Errorf("CancelOrder(someone else's) = %v; want ErrNotFound", err)
			}
			if st, err := s.CancelOrder(ctx, canceller.ID, "canceller", in); err != nil || st.Returned == nil || st.Returned.Stock != 1 {
				t.Errorf("CancelOrder = %+v, %v; want the unit returned (stock 1)", st, err)
			}
			if st, err := s.CancelOrder(ctx, canceller.ID, "canceller", in); err != nil || st.Returned != nil || st.Changed {
				t.Errorf("CancelOrder again = %+v, %v; want cancelled, nothing returned", st, err)
			}
			if _, err := s.PayOrder(ctx, canceller.ID, in); !errors.Is(err, service.ErrOrderCancelled) {
				t.Errorf("PayOrder(cancelled) = %v; want ErrOrderCancelled", err)
			}
			due := now.Add(window)
			if _, err := s.PayOrder(ctx, sleeper.ID, due); !errors.Is(err, service.ErrOrderExpired) {
				t.Errorf("PayOrder at expires_at = %v; want ErrOrderExpired", err)
			}
			if ex, err := s.ExpireDue(ctx, service.ExpiryRun{Fence: 5, Now: due, Limit: 10}); err != nil || ex.Orders != 1 || ex.Units != 1 || len(ex.SKUs) != 1 || ex.SKUs[0].Stock != 2 {
				t.Errorf("ExpireDue = %+v, %v; want the sleeper's unit back (stock 2)", ex, err)
			}
			if ex, err := s.ExpireDue(ctx, service.ExpiryRun{Fence: 5, Now: due, Limit: 10}); err != nil || ex.Orders != 0 {
				t.Errorf("ExpireDue again = %+v, %v; want nothing due", ex, err)
			}
			if _, err := s.CancelOrder(ctx, sleeper.ID, "sleeper", due); !errors.Is(err, service.ErrOrderExpired) {
				t.Errorf("CancelOrder(expired) = %v; want ErrOrderExpired", err)
			}
			// The returned units freed their buyers' quota (per_user_limit 1).
			again := pendingOrders(t, s, sku.ID, due, "canceller", "sleeper")
			if len(again) != 2 {
				t.Fatalf("re-buys = %d; want 2", len(again))
			}
			got, _ := s.SKU(ctx, sku.ID)
			if got.Stock != 0 || got.Sold != 3 || got.TotalStock != 3 {
				t.Errorf("stock %d sold %d total %d; want 0, 3, 3", got.Stock, got.Sold, got.TotalStock)
			}
		})
	}
}

// TestExpireDue_StaleFenceWritesNothing: once a sweeper with fence 100
// wrote, one with 99 (a lease superseded while its holder was paused) is
// refused with nothing written, though orders are due; a fence of the
// other lock backend resets the comparison (invariant 12).
func TestExpireDue_StaleFenceWritesNothing(t *testing.T) {
	t.Parallel()
	db, s, sku := setup(t, 4, 1)
	ctx := context.Background()
	created := time.Now().UTC().Truncate(time.Microsecond)
	pendingOrders(t, s, sku.ID, created, "a", "b", "c", "d")
	due := created.Add(window)

	if ex, err := s.ExpireDue(ctx, service.ExpiryRun{Fence: 100, Now: due, Limit: 1}); err != nil || ex.Orders != 1 {
		t.Fatalf("ExpireDue(fence 100) = %+v, %v; want one order", ex, err)
	}
	ex, err := s.ExpireDue(ctx, service.ExpiryRun{Fence: 99, Now: due, Limit: 10})
	if !errors.Is(err, service.ErrStaleFence) || ex.Orders != 0 {
		t.Fatalf("ExpireDue(fence 99) = %+v, %v; want ErrStaleFence", ex, err)
	}
	if c := statusCounts(t, db, sku.ID); c[service.OrderExpired] != 1 || c[service.OrderPending] != 3 {
		t.Errorf("after the stale sweep: %v; want 1 expired, 3 pending", c)
	}
	zk := service.ZooKeeperFences + 7
	if ex, err := s.ExpireDue(ctx, service.ExpiryRun{Fence: zk, Now: due, Limit: 1}); err != nil || ex.Orders != 1 {
		t.Errorf("ExpireDue(a ZooKeeper fence) = %+v, %v; want accepted", ex, err)
	}
	if _, err := s.ExpireDue(ctx, service.ExpiryRun{Fence: 101, Now: due, Limit: 1}); err != nil {
		t.Errorf("ExpireDue(a Redis fence after ZooKeeper's) = %v; want accepted (another backend)", err)
	}
	if c := statusCounts(t, db, sku.ID); c[service.OrderExpired] != 3 {
		t.Errorf("statuses %v; want 3 expired", c)
	}
}

// TestRestockDuringSweep sets the stock while sweeps return units, at
// once, round after round: the stock adds up at every commit and every
// expired unit is counted once.
func TestRestockDuringSweep(t *testing.T) {
	t.Parallel()
	const rounds, per = 10, 20
	db, s, sku := setup(t, rounds*per, 1)
	ctx := context.Background()
	created := time.Now().UTC().Truncate(time.Microsecond)
	var expired int64
	for r := range rounds {
		pendingOrders(t, s, sku.ID, created, users(fmt.Sprintf("r%d", r), per)...)
		start := make(chan struct{})
		var (
			wg         sync.WaitGroup
			ex         service.Expiry
			exErr, err error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			ex, exErr = s.ExpireDue(ctx, service.ExpiryRun{Fence: int64(r + 1), Now: created.Add(window), Limit: per})
		}()
		go func() { defer wg.Done(); <-start; _, _, err = s.SetStock(ctx, sku.ID, int64(1000+r)) }()
		close(start)
		wg.Wait()
		if exErr != nil || err != nil {
			t.Fatalf("round %d: ExpireDue %v, SetStock %v", r, exErr, err)
		}
		if ex.Orders != per {
			t.Errorf("round %d: expired %d; want %d", r, ex.Orders, per)
		}
		expired += int64(ex.Orders)
		statusCounts(t, db, sku.ID)
	}
	if c := statusCounts(t, db, sku.ID); c[service.OrderExpired] != expired || c[service.OrderPending] != 0 {
		t.Errorf("statuses %v; want %d expired, none pending", c, expired)
	}
	got, _ := s.SKU(ctx, sku.ID)
	if got.Sold != 0 {
		t.Errorf("sold = %d; want 0 (every order expired)", got.Sold)
	}
}
