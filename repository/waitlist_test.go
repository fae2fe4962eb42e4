package repository_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// The waitlist (docs/design.md, invariant 20): units that come back go to
// the SKU's waiting orders in arrival order, in the transaction that
// returns them, exactly once; a waiting order holds no unit.

// waitlistBackends are the stores with the payment window of orders
// allotted to waiters set, as app wires them.
var waitlistBackends = []backend{
	{"mariadb", func(t *testing.T) (*gorm.DB, store) {
		db, _ := openMariaDB(t)
		return db, repository.NewMySQL(db, repository.WithPaymentTimeout(window))
	}},
	{"sqlite", func(t *testing.T) (*gorm.DB, store) {
		db, _ := openSQLite(t)
		return db, repository.NewSQLite(db, repository.WithPaymentTimeout(window))
	}},
}

// onEach runs test on each of waitlistBackends, in parallel.
func onEach(t *testing.T, test func(t *testing.T, db *gorm.DB, s store)) {
	t.Parallel()
	for _, be := range waitlistBackends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			test(t, db, s)
		})
	}
}

// waitlistMax is the tests' order.waitlist_max unless one says otherwise.
const waitlistMax = 100

// line asks for one unit per user, each with wait, arriving at arrival,
// arrival+1, ... (unix µs), and returns each request's outcome.
func line(t *testing.T, s store, skuID, arrival int64, users ...string) []service.Outcome {
	t.Helper()
	b := service.Batch{SKUID: skuID, Now: time.Now().UTC().Truncate(time.Microsecond), PaymentTimeout: window, WaitlistMax: waitlistMax}
	for i, u := range users {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: skuID, UserID: u, Quantity: 1, Wait: true, Arrival: arrival + int64(i)})
	}
	res, err := s.CommitBatch(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return res.Outcomes
}

// waiting asserts every outcome is a new waiting order and returns them.
func waiting(t *testing.T, outs []service.Outcome) []service.Order {
	t.Helper()
	var out []service.Order
	for i, o := range outs {
		if o.Err != nil || !o.Placed.Created || o.Placed.Order.Status != service.OrderWaiting {
			t.Fatalf("request %d = %+v, %v; want a new waiting order", i, o.Placed, o.Err)
		}
		out = append(out, o.Placed.Order)
	}
	return out
}

func newSaleSKU(t *testing.T, s store, stock, limit int64, ends *time.Time) service.SKU {
	t.Helper()
	now := time.Now().UTC()
	sku, err := s.CreateSKU(context.Background(), service.SKU{Name: "second act", TotalStock: stock, Stock: stock, PerUserLimit: limit,
		EndsAt: ends, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return sku
}

// statuses returns the status of each order, read back.
func statuses(t *testing.T, s store, orders []service.Order) []service.OrderStatus {
	t.Helper()
	out := make([]service.OrderStatus, len(orders))
	for i, o := range orders {
		out[i] = orderStatus(t, s, o.ID)
	}
	return out
}

func TestWaitlist_ReturnedUnitsGoToTheEarliestWaiters(t *testing.T) {
	onEach(t, func(t *testing.T, db *gorm.DB, s store) {
		ctx := context.Background()
		sku := newSaleSKU(t, s, 3, 1, nil)
		created := time.Now().UTC().Truncate(time.Microsecond)
		buyers := pendingOrders(t, s, sku.ID, created, "a", "b", "c")
		// Two batches, the second from an instance whose buyers arrived
		// earlier: the line is by arrival, not by insertion.
		late := waiting(t, line(t, s, sku.ID, 2000, "w2", "w3"))
		early := waiting(t, line(t, s, sku.ID, 1000, "w0", "w1"))
		if late[0].Arrival != 2000 || early[1].Arrival != 1001 {
			t.Fatalf("arrivals = %d, %d; want the requests' 2000, 1001", late[0].Arrival, early[1].Arrival)
		}
		ws := append(early, late...) // w0..w3, by arrival
		statusCounts(t, db, sku.ID)

		// A cancel gives its unit to w0, in its own transaction.
		at := created.Add(time.Second)
		st, err := s.CancelOrder(ctx, buyers[0].ID, "a", at)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Allotted) != 1 || st.Allotted[0].ID != ws[0].ID || st.Returned.Stock != 0 || st.Returned.Waiters != 3 {
			t.Fatalf("cancel allotted %+v, left %+v; want w0's order, stock 0, 3 waiters", st.Allotted, st.Returned)
		}
		got, err := s.Order(ctx, ws[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != service.OrderPending || got.AllocatedAt == nil || !got.AllocatedAt.Equal(at) || got.ExpiresAt == nil || !got.ExpiresAt.Equal(at.Add(window)) {
			t.Fatalf("w0's order = %+v; want pending since %v, a fresh window to %v", got, at, at.Add(window))
		}
		statusCounts(t, db, sku.ID)

		// An expiry gives b's and c's units to w1 and w2.
		ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: created.Add(window), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if ex.Orders != 2 || len(ex.Allotted) != 2 || ex.Allotted[0].ID != ws[1].ID || ex.Allotted[1].ID != ws[2].ID {
			t.Fatalf("expiry = %+v; want b and c expired, w1 and w2 allotted", ex)
		}
		statusCounts(t, db, sku.ID)

		// A restock goes to w3 first; what is left is free.
		sku2, allotted, err := s.SetStock(ctx, sku.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(allotted) != 1 || allotted[0].ID != ws[3].ID || sku2.Stock != 1 || sku2.Waiters != 0 || sku2.TotalStock != 5 {
			t.Fatalf("restock allotted %+v, left %+v; want w3, 1 free, no waiter, 5 in all", allotted, sku2)
		}
		want := []service.OrderStatus{service.OrderPending, service.OrderPending, service.OrderPending, service.OrderPending}
		if got := statuses(t, s, ws); !slices.Equal(got, want) {
			t.Errorf("waiters' orders = %v; want %v", got, want)
		}
		counts := statusCounts(t, db, sku.ID)
		if counts[service.OrderWaiting] != 0 || counts[service.OrderPending] != 4 {
			t.Errorf("orders by status = %v; want 4 pending, none waiting", counts)
		}
		// Each unit went once: a second expiry or cancel moves nothing.
		if ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: created.Add(window), Limit: 10}); err != nil || ex.Orders != 0 || len(ex.Allotted) != 0 {
			t.Errorf("a second expiry = %+v, %v; want nothing", ex, err)
		}
		if st, err := s.CancelOrder(ctx, buyers[0].ID, "a", at); err != nil || st.Changed || len(st.Allotted) != 0 {
			t.Errorf("a second cancel = %+v, %v; want the cancelled order, unchanged", st, err)
		}
	})
}

// TestWaitlist_AWaiterTooBigIsPassedOver: units go on down the line to
// the first waiter they fit; the bigger one keeps its place for more.
func TestWaitlist_AWaiterTooBigIsPassedOver(t *testing.T) {
	onEach(t, func(t *testing.T, db *gorm.DB, s store) {
		ctx := context.Background()
		sku := newSaleSKU(t, s, 3, 2, nil)
		created := time.Now().UTC().Truncate(time.Microsecond)
		buyers := pendingOrders(t, s, sku.ID, created, "a", "b", "c")
		b := service.Batch{SKUID: sku.ID, Now: created, PaymentTimeout: window, WaitlistMax: waitlistMax, Requests: []service.OrderRequest{
			{SKUID: sku.ID, UserID: "big", Quantity: 2, Wait: true, Arrival: 10},
			{SKUID: sku.ID, UserID: "small", Quantity: 1, Wait: true, Arrival: 11},
		}}
		res, err := s.CommitBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		ws := waiting(t, res.Outcomes)
		if res.Outcomes[1].Placed.Position != 1 || res.SKU.Waiters != 2 {
			t.Fatalf("small's position %d, sku waiters %d; want 1, 2", res.Outcomes[1].Placed.Position, res.SKU.Waiters)
		}
		st, err := s.CancelOrder(ctx, buyers[0].ID, "", created)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Allotted) != 1 || st.Allotted[0].ID != ws[1].ID {
			t.Fatalf("one unit back went to %+v; want small's order, big's does not fit", st.Allotted)
		}
		statusCounts(t, db, sku.ID)
		// One unit free: big still does not fit, and waits.
		if st, err = s.CancelOrder(ctx, buyers[1].ID, "", created); err != nil || len(st.Allotted) != 0 || st.Returned.Stock != 1 {
			t.Fatalf("second cancel = %+v, %v; want 1 unit free, big waiting", st, err)
		}
		statusCounts(t, db, sku.ID)
		// Two free: big's turn.
		if st, err = s.CancelOrder(ctx, buyers[2].ID, "", created); err != nil || len(st.Allotted) != 1 || st.Allotted[0].ID != ws[0].ID || st.Returned.Stock != 0 {
			t.Fatalf("third cancel = %+v, %v; want big's order given both units", st, err)
		}
		counts := statusCounts(t, db, sku.ID)
		if counts[service.OrderWaiting] != 0 {
			t.Errorf("orders by status = %v; want none waiting", counts)
		}
	})
}

// TestWaitlist_Bounds: order.waitlist_max waiters per SKU, one waiting
// order per buyer (also in the schema), a waiting order within the
// per-user limit and holding no unit.
func TestWaitlist_Bounds(t *testing.T) {
	onEach(t, func(t *testing.T, db *gorm.DB, s store) {
		ctx := context.Background()
		sku := newSaleSKU(t, s, 0, 3, nil)
		now := time.Now().UTC().Truncate(time.Microsecond)
		b := service.Batch{SKUID: sku.ID, Now: now, WaitlistMax: 2, Requests: []service.OrderRequest{
			{SKUID: sku.ID, UserID: "a", Quantity: 1, Wait: true, Arrival: 1},
			{SKUID: sku.ID, UserID: "b", Quantity: 1, Wait: true, Arrival: 2, IdempotencyKey: "kb"},
			{SKUID: sku.ID, UserID: "c", Quantity: 1, Wait: true, Arrival: 3},
			{SKUID: sku.ID, UserID: "d", Quantity: 1, Arrival: 4},
		}}
		res, err := s.CommitBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		wantErr := []error{nil, nil, service.ErrWaitlistFull, service.ErrSoldOut}
		for i, out := range res.Outcomes {
			if !errors.Is(out.Err, wantErr[i]) || (wantErr[i] == nil) != (out.Err == nil) {
				t.Errorf("request %d = %v; want %v", i, out.Err, wantErr[i])
			}
		}
		// The same key again replays the waiting order; the buyer's
		// second wait is refused, by Allocate and by the schema.
		again := service.Batch{SKUID: sku.ID, Now: now, WaitlistMax: 10, Requests: []service.OrderRequest{
			{SKUID: sku.ID, UserID: "b", Quantity: 1, Wait: true, Arrival: 5, IdempotencyKey: "kb"},
			{SKUID: sku.ID, UserID: "a", Quantity: 1, Wait: true, Arrival: 6},
		}}
		res2, err := s.CommitBatch(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		if o := res2.Outcomes[0]; o.Err != nil || o.Placed.Created || o.Placed.Order.ID != res.Outcomes[1].Placed.Order.ID {
			t.Errorf("replay = %+v, %v; want b's waiting order, not created", o.Placed, o.Err)
		}
		if o := res2.Outcomes[1]; !errors.Is(o.Err, service.ErrAlreadyWaiting) {
			t.Errorf("a's second wait = %v; want ErrAlreadyWaiting", o.Err)
		}
		if err := db.Exec("UPDATE user_purchases SET waiting = 2 WHERE sku_id = ? AND user_id = 'a'", sku.ID).Error; err == nil {
			t.Error("the schema took a buyer with two waiting orders")
		}
		if err := db.Exec("UPDATE skus SET waiters = -1 WHERE id = ?", sku.ID).Error; err == nil {
			t.Error("the schema took a negative count of waiters")
		}
		got, err := s.SKU(ctx, sku.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Stock != 0 || got.Sold != 0 || got.TotalStock != 0 || got.Waiters != 2 {
			t.Errorf("sku = %+v; want nothing sold, 2 waiters", got)
		}
		statusCounts(t, db, sku.ID)
	})
}

// TestWaitlist_Leaving: a buyer cancels a waiting order (no unit moves,
// the holding goes); the sale's end lapses the others; neither can be
// paid; a unit returned after the end goes to nobody.
func TestWaitlist_Leaving(t *testing.T) {
	onEach(t, func(t *testing.T, db *gorm.DB, s store) {
		ctx := context.Background()
		ends := time.Now().UTC().Add(window / 2).Truncate(time.Microsecond) // before the buyer's payment window ends
		sku := newSaleSKU(t, s, 1, 1, &ends)
		created := time.Now().UTC().Truncate(time.Microsecond)
		buyer := pendingOrders(t, s, sku.ID, created, "a")[0]
		ws := waiting(t, line(t, s, sku.ID, 100, "w0", "w1", "w2"))
		if ws[0].ExpiresAt == nil || !ws[0].ExpiresAt.Equal(ends) {
			t.Fatalf("waiting order lapses at %v; want the sale's end %v", ws[0].ExpiresAt, ends)
		}
		if _, err := s.PayOrder(ctx, ws[1].ID, created); !errors.Is(err, service.ErrOrderWaiting) {
			t.Errorf("paying a waiting order = %v; want ErrOrderWaiting", err)
		}
		if _, err := s.CancelOrder(ctx, ws[0].ID, "w1", created); !errors.Is(err, service.ErrNotFound) {
			t.Errorf("cancel of another's waiting order = %v; want ErrNotFound", err)
		}
		st, err := s.CancelOrder(ctx, ws[0].ID, "w0", created)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Changed || st.Returned != nil || st.Order.Status != service.OrderCancelled {
			t.Fatalf("cancel of a waiting order = %+v; want cancelled, no unit returned", st)
		}
		if st, err = s.CancelOrder(ctx, ws[0].ID, "w0", created); err != nil || st.Changed || st.Order.Status != service.OrderCancelled {
			t.Errorf("cancel again = %+v, %v; want the cancelled order, unchanged", st, err)
		}
		got, err := s.SKU(ctx, sku.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Stock != 0 || got.Sold != 1 || got.Waiters != 2 {
			t.Fatalf("sku = %+v; want 1 sold, 2 waiting", got)
		}
		statusCounts(t, db, sku.ID)

		// The admin moves the sale's end: the waiters lapse then.
		ends = ends.Add(time.Second)
		if _, err := s.UpdateSKU(ctx, sku.ID, service.SKUChange{EndsAt: service.OptionalTime{Set: true, Time: &ends}}, created); err != nil {
			t.Fatal(err)
		}
		if o, err := s.Order(ctx, ws[1].ID); err != nil || o.ExpiresAt == nil || !o.ExpiresAt.Equal(ends) {
			t.Fatalf("after the end moved, the waiting order = %+v, %v; want it to lapse at %v", o, err, ends)
		}
		if ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: ends.Add(-time.Millisecond), Limit: 10}); err != nil || ex.Lapsed != 0 {
			t.Fatalf("sweep before the new end = %+v, %v; want nothing lapsed", ex, err)
		}

		// The sale ends: the sweep lapses the two left; a unit coming
		// back afterwards is free, not given.
		after := ends.Add(time.Second)
		ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: after, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if ex.Lapsed != 2 || ex.Orders != 0 {
			t.Fatalf("sweep at the end = %+v; want 2 lapsed", ex)
		}
		if _, err := s.CancelOrder(ctx, ws[1].ID, "", after); !errors.Is(err, service.ErrOrderLapsed) {
			t.Errorf("cancel of a lapsed order = %v; want ErrOrderLapsed", err)
		}
		st, err = s.CancelOrder(ctx, buyer.ID, "a", after)
		if err != nil || len(st.Allotted) != 0 || st.Returned.Stock != 1 {
			t.Fatalf("cancel after the end = %+v, %v; want the unit free", st, err)
		}
		counts := statusCounts(t, db, sku.ID)
		if counts[service.OrderLapsed] != 2 || counts[service.OrderWaiting] != 0 {
			t.Errorf("orders by status = %v; want 2 lapsed", counts)
		}
		var holdings int64
		if err := db.Raw("SELECT COUNT(*) FROM user_purchases WHERE sku_id = ?", sku.ID).Scan(&holdings).Error; err != nil {
			t.Fatal(err)
		}
		if holdings != 0 {
			t.Errorf("%d holdings left; want none", holdings)
		}
	})
}

// TestWaitlist_ConcurrentReturnsAllotEachUnitOnceInArrivalOrder: cancels,
// an expiry, a restock and waiters leaving all at once. No unit is given
// twice, none is left free while a waiter waits, and every order given
// units arrived before every order still waiting.
func TestWaitlist_ConcurrentReturnsAllotEachUnitOnceInArrivalOrder(t *testing.T) {
	t.Parallel()
	db, s := waitlistBackends[0].open(t) // MariaDB: concurrent transactions
	ctx := context.Background()
	const sold, early, waiters = 30, 10, 40
	sku := newSaleSKU(t, s, sold, 1, nil)
	created := time.Now().UTC().Truncate(time.Microsecond)
	due := pendingOrders(t, s, sku.ID, created.Add(-window), users("due", early)...) // expire now
	live := pendingOrders(t, s, sku.ID, created, users("live", sold-early)...)
	var ws []service.Order
	for i := range waiters / 10 { // four batches, arrivals interleaved across them
		var us []string
		for j := range 10 {
			us = append(us, fmt.Sprintf("w%02d", j*4+i))
		}
		b := service.Batch{SKUID: sku.ID, Now: created, WaitlistMax: waitlistMax}
		for j, u := range us {
			b.Requests = append(b.Requests, service.OrderRequest{SKUID: sku.ID, UserID: u, Quantity: 1, Wait: true, Arrival: int64(1000 + j*4 + i)})
		}
		res, err := s.CommitBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, waiting(t, res.Outcomes)...)
	}
	slices.SortFunc(ws, func(a, b service.Order) int { return int(a.Arrival - b.Arrival) })

	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		given = map[int64]int{} // order → times reported allotted
		errs  []error
	)
	report := func(allotted []service.Order, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		for _, o := range allotted {
			given[o.ID]++
		}
	}
	retry := func(f func() ([]service.Order, error)) {
		defer wg.Done()
		<-start
		for attempt := 0; ; attempt++ {
			allotted, err := f()
			if errors.Is(err, service.ErrConflict) && attempt < 20 {
				continue // a deadlock or a waiter allotted meanwhile: as Lifecycle retries
			}
			report(allotted, err)
			return
		}
	}
	for _, o := range live[:10] {
		wg.Add(1)
		go retry(func() ([]service.Order, error) {
			st, err := s.CancelOrder(ctx, o.ID, "", time.Now().UTC().Truncate(time.Microsecond))
			return st.Allotted, err
		})
	}
	for _, o := range ws[30:35] { // late waiters leave
		wg.Add(1)
		go retry(func() ([]service.Order, error) {
			st, err := s.CancelOrder(ctx, o.ID, "", time.Now().UTC().Truncate(time.Microsecond))
			return st.Allotted, err
		})
	}
	wg.Add(2)
	go retry(func() ([]service.Order, error) {
		ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: created, Limit: 100})
		return ex.Allotted, err
	})
	go retry(func() ([]service.Order, error) {
		_, allotted, err := s.SetStock(ctx, sku.ID, 5)
		return allotted, err
	})
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if n := len(due); n != early {
		t.Fatalf("%d due orders", n)
	}
	// 10 cancelled + 10 expired + 5 restocked = 25 units for 35 waiters
	// who stayed: the 25 earliest of them get one each.
	var stayed []service.Order
	for _, o := range ws {
		if orderStatus(t, s, o.ID) != service.OrderCancelled {
			stayed = append(stayed, o)
		}
	}
	for id, n := range given {
		if n != 1 {
			t.Errorf("order %d reported allotted %d times", id, n)
		}
	}
	var allotted, still int
	for i, o := range stayed {
		st := orderStatus(t, s, o.ID)
		switch st {
		case service.OrderPending:
			allotted++
			if still > 0 {
				t.Errorf("waiter %d (arrival %d) allotted after an earlier one still waits", i, o.Arrival)
			}
		case service.OrderWaiting:
			still++
		default:
			t.Errorf("waiter %d is %s", i, st)
		}
	}
	if allotted != 25 || still != len(stayed)-25 || len(given) < allotted {
		t.Errorf("%d allotted, %d waiting of %d who stayed; %d reported allotted", allotted, still, len(stayed), len(given))
	}
	got, err := s.SKU(ctx, sku.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock != 0 && still > 0 {
		t.Errorf("%d units free while %d wait", got.Stock, still)
	}
	statusCounts(t, db, sku.ID)
}

// versions reads the joined_version and allotted_version of each order
// of skuID, by id; NULL reads as 0.
func versions(t *testing.T, db *gorm.DB, skuID int64) map[int64][2]int64 {
	t.Helper()
	var rows []struct{ ID, Joined, Allotted int64 }
	if err := db.Raw("SELECT id, COALESCE(joined_version, 0) AS joined, COALESCE(allotted_version, 0) AS allotted FROM orders WHERE sku_id = ?", skuID).
		Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := make(map[int64][2]int64, len(rows))
	for _, r := range rows {
		out[r.ID] = [2]int64{r.Joined, r.Allotted}
	}
	return out
}

// TestWaitlist_VersionsOrderTheLine: a waiting order records the SKU
// version its batch wrote, an allotted one the version its allotment
// wrote, and an order that never waited neither: the exact order of
// joining and allotting the audit checks (allotted_in_order).
func TestWaitlist_VersionsOrderTheLine(t *testing.T) {
	onEach(t, func(t *testing.T, db *gorm.DB, s store) {
		ctx := context.Background()
		sku := newSaleSKU(t, s, 1, 1, nil)
		version := func() int64 {
			t.Helper()
			got, err := s.SKU(ctx, sku.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.Version
		}
		buyer := pendingOrders(t, s, sku.ID, time.Now().UTC().Truncate(time.Microsecond), "a")[0]
		before := version()
		first := waiting(t, line(t, s, sku.ID, 10, "w0", "w1"))
		joined := version()
		second := waiting(t, line(t, s, sku.ID, 5, "w2")) // arrived first, joined later
		if joined != before+1 || version() != joined+1 {
			t.Fatalf("sku versions %d, %d, %d around two batches of waiters; want each batch one apart", before, joined, version())
		}
		if _, err := s.CancelOrder(ctx, buyer.ID, "a", time.Now().UTC().Truncate(time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		allotted := version() // the cancel's return, then the allotment to w2
		want := map[int64][2]int64{
			buyer.ID:     {0, 0},
			first[0].ID:  {joined, 0},
			first[1].ID:  {joined, 0},
			second[0].ID: {joined + 1, allotted},
		}
		if got := versions(t, db, sku.ID); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("(joined_version, allotted_version) by order = %v; want %v", got, want)
		}
		if allotted != joined+3 {
			t.Errorf("sku version after the cancel = %d; want %d (the return, then the allotment)", allotted, joined+3)
		}
		statusCounts(t, db, sku.ID)
	})
}

// A waiter's position is its place in the line by arrival: an earlier
// arrival whose batch commits later (another instance's queue) stands
// ahead of those already waiting, and is told so.
func TestWaitlist_PositionsFollowArrival(t *testing.T) {
	onEach(t, func(t *testing.T, db *gorm.DB, s store) {
		sku := newSaleSKU(t, s, 1, 1, nil)
		pendingOrders(t, s, sku.ID, time.Now().UTC().Truncate(time.Microsecond), "a")
		var got []int64
		for _, b := range []struct {
			arrival int64
			users   []string
		}{{100, []string{"w0", "w1"}}, {50, []string{"w2"}}, {200, []string{"w3"}}, {75, []string{"w4", "w5"}}} {
			for _, o := range line(t, s, sku.ID, b.arrival, b.users...) {
				if o.Err != nil || o.Placed.Order.Status != service.OrderWaiting {
					t.Fatalf("arrival %d: %+v, %v; want a waiting order", b.arrival, o.Placed, o.Err)
				}
				got = append(got, o.Placed.Position)
			}
		}
		// w0 (100) and w1 (101) join first; w2 (50) goes ahead of both;
		// w3 (200) behind all three; w4 (75) and w5 (76) behind w2 only.
		if want := []int64{0, 1, 0, 3, 1, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("positions in commit order (w0..w5) = %v; want %v, the waiters ahead by arrival", got, want)
		}
		statusCounts(t, db, sku.ID)
	})
}
