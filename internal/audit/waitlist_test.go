package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/audit"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// waitSale sells a SKU (stock 3, limit 2, the sale ending at ends, or
// never when nil: a waiting order then has no expires_at) to a,
// b and c, then lines up w0, w1, w2 (one unit each, arrivals 100–102)
// and, in a later batch, big (two units, arrival 99: ahead of them all)
// and w3 (arrival 103). Cancels of a and b give their units to w0 and w1
// (big does not fit one unit), w1 pays, and w2 leaves the line. It
// returns the SKU and the order id of each buyer.
func waitSale(t *testing.T, s *repository.MySQL, at time.Time, ends *time.Time) (int64, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	sku, err := s.CreateSKU(ctx, service.SKU{Name: "waitlist audit", TotalStock: 3, Stock: 3, PerUserLimit: 2,
		EndsAt: ends, CreatedAt: at, UpdatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	commit := func(wait bool, reqs ...service.OrderRequest) {
		t.Helper()
		b := service.Batch{SKUID: sku.ID, Now: at, PaymentTimeout: window, WaitlistMax: 10}
		for _, r := range reqs {
			r.SKUID, r.Wait = sku.ID, wait
			if r.Quantity == 0 {
				r.Quantity = 1
			}
			b.Requests = append(b.Requests, r)
		}
		res, err := s.CommitBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range res.Outcomes {
			if o.Err != nil || !o.Placed.Created || (o.Placed.Order.Status == service.OrderWaiting) != wait {
				t.Fatalf("order of %s = %+v, %v; want a new order, waiting %t", reqs[i].UserID, o.Placed, o.Err, wait)
			}
			ids[reqs[i].UserID] = o.Placed.Order.ID
		}
	}
	commit(false, service.OrderRequest{UserID: "a"}, service.OrderRequest{UserID: "b"}, service.OrderRequest{UserID: "c"})
	commit(true, service.OrderRequest{UserID: "w0", Arrival: 100}, service.OrderRequest{UserID: "w1", Arrival: 101},
		service.OrderRequest{UserID: "w2", Arrival: 102})
	commit(true, service.OrderRequest{UserID: "big", Quantity: 2, Arrival: 99}, service.OrderRequest{UserID: "w3", Arrival: 103})
	for _, u := range []string{"a", "b"} {
		st, err := s.CancelOrder(ctx, ids[u], u, at)
		if err != nil || len(st.Allotted) != 1 {
			t.Fatalf("cancel of %s = %+v, %v; want its unit given to a waiter", u, st, err)
		}
	}
	if _, err := s.PayOrder(ctx, ids["w1"], at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelOrder(ctx, ids["w2"], "w2", at); err != nil {
		t.Fatal(err)
	}
	return sku.ID, ids
}

// openWaitlist opens a database, its store giving waiters pending orders
// (as app wires it), and an audit of one SKU that fails the test on an
// error.
func openWaitlist(t *testing.T) (*sql.DB, *repository.MySQL, func(id int64) audit.Report) {
	t.Helper()
	db := testenv.DB(t, testenv.Database(t))
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	return sqlDB, repository.NewMySQL(db, repository.WithPaymentTimeout(window)), func(id int64) audit.Report {
		t.Helper()
		r, err := audit.SKU(context.Background(), sqlDB, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// TestAudit_CleanWaitlistSale: a sale with waiters given units, one
// passed over (too big), one left and two still waiting breaks no
// invariant and is counted exactly; so is the same sale once its end
// lapsed the waiters.
func TestAudit_CleanWaitlistSale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, s, auditSKU := openWaitlist(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	ends := at.Add(time.Hour)
	id, _ := waitSale(t, s, at, &ends)
	endless, _ := waitSale(t, s, at, nil) // its waiting orders never lapse: no expires_at

	for _, id := range []int64{id, endless} {
		r := auditSKU(id)
		want := audit.Report{SKU: id, TotalStock: 3, Stock: 0, Sold: 3, PerUserLimit: 2, Waiters: 2, OnSale: true,
			Pending: audit.Tally{Orders: 2, Units: 2}, Paid: audit.Tally{Orders: 1, Units: 1},
			Cancelled: audit.Tally{Orders: 3, Units: 3}, Waiting: audit.Tally{Orders: 2, Units: 3},
			Allotted: audit.Tally{Orders: 2, Units: 2},
			Buyers:   5, Holders: 5, HeldUnits: 6, Failures: []audit.Failure{}}
		r.Version = 0
		if fmt.Sprint(r) != fmt.Sprint(want) {
			t.Errorf("SKU(%d) =\n%+v; want\n%+v", id, r, want)
		}
	}

	// A sweep after the first sale's end expires the unpaid orders of
	// both: the ended sale's units stay free and its waiters lapse; the
	// endless sale's two units go to big, first in line.
	ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: ends.Add(time.Second), Limit: 10})
	if err != nil || ex.Lapsed != 2 || ex.Orders != 4 || len(ex.Allotted) != 1 || ex.Allotted[0].UserID != "big" {
		t.Fatalf("sweep after the end = %+v, %v; want 4 expired, 2 lapsed, big's order given units", ex, err)
	}
	r := auditSKU(id)
	if !r.OK() || r.Lapsed != (audit.Tally{Orders: 2, Units: 3}) || r.Waiting != (audit.Tally{}) || r.Waiters != 0 || r.Stock != 2 {
		t.Errorf("after the lapse SKU(%d) = %+v; want OK, 2 lapsed orders of 3 units, none waiting, 2 free", id, r)
	}
	r = auditSKU(endless)
	if !r.OK() || r.Allotted != (audit.Tally{Orders: 3, Units: 4}) || r.Waiting != (audit.Tally{Orders: 1, Units: 1}) || r.Stock != 0 {
		t.Errorf("after the expiry SKU(%d) = %+v; want OK, 3 orders given 4 units, w3 waiting, none free", endless, r)
	}
}

// waitlistTampers break a SKU sold by waitSale (%[1]d is the SKU, %[2]d
// w3's waiting order), each failing exactly the invariants listed.
var waitlistTampers = []struct {
	Name  string
	SQL   []string
	Fails []audit.Invariant
}{
	{"the waiters' count off", []string{"UPDATE skus SET waiters = waiters + 1 WHERE id = %[1]d"}, []audit.Invariant{audit.WaitersCounted}},
	{"a holding's waiting flag off", []string{"UPDATE user_purchases SET waiting = 0 WHERE sku_id = %[1]d AND user_id = 'w3'"}, []audit.Invariant{audit.WaitersCounted}},
	{"a holding waiting without a waiting order", []string{"UPDATE user_purchases SET waiting = 1 WHERE sku_id = %[1]d AND user_id = 'w0'"}, []audit.Invariant{audit.WaitersCounted}},
	{"a waiting order marked given units", []string{"UPDATE orders o JOIN skus s ON s.id = o.sku_id SET o.allocated_at = NOW(6), o.allotted_version = s.version WHERE o.id = %[2]d"}, []audit.Invariant{audit.WaitersHoldNothing}},
	{"a unit sold to a waiting order", []string{"UPDATE skus SET sold = sold + 1, total_stock = total_stock + 1 WHERE id = %[1]d"}, []audit.Invariant{audit.UnitsHaveOrders}},
	{"an allotment past an earlier waiter still waiting", []string{"UPDATE orders SET arrival = 50 WHERE id = %[2]d"}, []audit.Invariant{audit.AllottedInOrder}},
	{"an allotment before an earlier waiter given units later", []string{"UPDATE orders SET arrival = 90 WHERE sku_id = %[1]d AND user_id = 'w1'"}, []audit.Invariant{audit.AllottedInOrder}},
	{"a waiter in line after the allotment is not skipped", []string{"UPDATE orders o JOIN skus s ON s.id = o.sku_id SET o.arrival = 50, o.joined_version = s.version WHERE o.id = %[2]d"}, nil},
	{"a unit free while a waiter fits it", []string{"UPDATE skus SET stock = stock + 1, total_stock = total_stock + 1 WHERE id = %[1]d"}, []audit.Invariant{audit.NoUnitFreeForAWaiter}},
	{"a unit free after the sale's end", []string{"UPDATE skus SET stock = stock + 1, total_stock = total_stock + 1, ends_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = %[1]d"}, nil},
	{"a waiting order settled", []string{"UPDATE orders SET settled_at = created_at WHERE id = %[2]d"}, []audit.Invariant{audit.SettledOnce}},
	{"a buyer's waiting order beyond the limit", []string{"UPDATE orders SET quantity = 2 WHERE id = %[2]d", "UPDATE user_purchases SET quantity = 2, per_user_limit = 1 WHERE sku_id = %[1]d AND user_id = 'w3'", "UPDATE skus SET per_user_limit = 1 WHERE id = %[1]d"}, []audit.Invariant{audit.WithinLimit}},
	{"a waiting order's units not held", []string{"UPDATE user_purchases SET quantity = 1 WHERE sku_id = %[1]d AND user_id = 'big'"}, []audit.Invariant{audit.HoldingsMatchOrders}},
}

// TestAudit_TamperedWaitlist: each broken waitlist fails exactly the
// invariants its tampering breaks, and the SKU sold beside it none.
func TestAudit_TamperedWaitlist(t *testing.T) {
	t.Parallel()
	db, s, auditSKU := openWaitlist(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	for _, tc := range waitlistTampers {
		t.Run(tc.Name, func(t *testing.T) {
			ends := at.Add(time.Hour)
			id, orders := waitSale(t, s, at, &ends)
			bystander, _ := waitSale(t, s, at, &ends)
			stmts := make([]string, len(tc.SQL))
			for i, q := range tc.SQL {
				stmts[i] = fmt.Sprintf(q, id, orders["w3"])
			}
			tamper(t, db, stmts...)
			r := auditSKU(id)
			if got := r.Failed(); !slices.Equal(got, tc.Fails) {
				t.Errorf("SKU(%d) fails %v; want %v\n%+v", id, got, tc.Fails, r.Failures)
			}
			if b := auditSKU(bystander); !b.OK() {
				t.Errorf("SKU(%d), untouched, fails %+v; want OK", bystander, b.Failures)
			}
		})
	}
}
