package audit_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/audit"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

const window = time.Minute

// sale sells a SKU (stock 10, limit 2) through the repository, in every
// lifecycle state: a (paid at creation, keyed), b (two pending units,
// keyed), c (cancelled), d (paid after pending), e (expired unpaid).
// It returns the SKU and the order ids by user.
func sale(t *testing.T, s *repository.MySQL, at time.Time) (int64, map[string][]int64) {
	t.Helper()
	ctx := context.Background()
	sku, err := s.CreateSKU(ctx, service.SKU{Name: "audit", TotalStock: 10, Stock: 10, PerUserLimit: 2, CreatedAt: at, UpdatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][]int64{}
	commit := func(now time.Time, timeout time.Duration, user, key string) int64 {
		t.Helper()
		res, err := s.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Now: now, PaymentTimeout: timeout,
			Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: user, Quantity: 1, IdempotencyKey: key}}})
		if err != nil {
			t.Fatal(err)
		}
		if o := res.Outcomes[0]; o.Err != nil {
			t.Fatalf("order of %s: %v", user, o.Err)
		}
		id := res.Outcomes[0].Placed.Order.ID
		ids[user] = append(ids[user], id)
		return id
	}
	key := func(k string) string { return fmt.Sprintf("%s-%d", k, sku.ID) }
	commit(at, 0, "a", key("ka"))
	commit(at, window, "b", key("kb1"))
	commit(at, window, "b", key("kb2"))
	c := commit(at, window, "c", "")
	if _, err := s.CancelOrder(ctx, c, "c", at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	d := commit(at, window, "d", "")
	if _, err := s.PayOrder(ctx, d, at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	commit(at.Add(-2*window), window, "e", "") // due at at-window
	ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: at.Add(-window / 2), Limit: 100})
	if err != nil || ex.Orders != 1 {
		t.Fatalf("ExpireDue = %+v, %v; want 1 order expired", ex, err)
	}
	return sku.ID, ids
}

func open(t *testing.T) (*gorm.DB, *sql.DB, *repository.MySQL) {
	t.Helper()
	db := testenv.DB(t, testenv.Database(t))
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	return db, sqlDB, repository.NewMySQL(db)
}

// TestAudit_CleanSale: a sale in every lifecycle state, a restock and a
// lowered limit (which keeps a buyer above it) break no invariant, and
// the report counts exactly what was sold.
func TestAudit_CleanSale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db, s := open(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	id, _ := sale(t, s, at)
	other, _ := sale(t, s, at)
	if _, _, err := s.SetStock(ctx, other, 20); err != nil { // a restock
		t.Fatal(err)
	}
	one := int64(1)
	if _, err := s.UpdateSKU(ctx, other, service.SKUChange{PerUserLimit: &one}, at); err != nil { // b keeps 2 > 1
		t.Fatal(err)
	}

	r, err := audit.SKU(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	want := audit.Report{SKU: id, TotalStock: 10, Stock: 6, Sold: 4, PerUserLimit: 2, OnSale: true,
		Pending: audit.Tally{Orders: 2, Units: 2}, Paid: audit.Tally{Orders: 2, Units: 2},
		Cancelled: audit.Tally{Orders: 1, Units: 1}, Expired: audit.Tally{Orders: 1, Units: 1},
		Buyers: 3, Holders: 3, HeldUnits: 4, Keyed: 3, Failures: []audit.Failure{}}
	r.Version = 0 // the repository's business
	if fmt.Sprint(r) != fmt.Sprint(want) {
		t.Errorf("SKU(%d) =\n%+v; want\n%+v", id, r, want)
	}

	var seen []int64
	if err := audit.All(ctx, db, 1, func(r audit.Report) error {
		seen = append(seen, r.SKU)
		if !r.OK() {
			t.Errorf("sku %d fails %+v after a clean sale", r.SKU, r.Failures)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []int64{id, other}) {
		t.Errorf("All audited %v; want %v", seen, []int64{id, other})
	}
}

// tamper runs stmts on one connection with the CHECK constraints off, as
// a restore, a hand edit or a schema without them would leave the data.
func tamper(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stmts = append(append([]string{"SET SESSION check_constraint_checks = 0"}, stmts...), "SET SESSION check_constraint_checks = 1")
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// dropKeyUniqueness drops every unique index of orders that covers
// idempotency_key (whichever the schema has), so a duplicate can be
// written as a schema without it would let one be.
func dropKeyUniqueness(t *testing.T, db *sql.DB) {
	t.Helper()
	rows, err := db.Query(`SELECT DISTINCT index_name FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'orders' AND column_name = 'idempotency_key' AND non_unique = 0`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	for _, n := range names {
		if _, err := db.Exec("ALTER TABLE orders DROP INDEX " + n); err != nil {
			t.Fatal(err)
		}
	}
}

// tampers is each way the data can be broken, applied to a SKU sold by
// sale (%[1]d is the SKU, %[2]d an order of a, %[3]d the cancelled order
// of c, %[4]d the expired order of e), with the invariants it breaks.
var tampers = []struct {
	Name  string
	SQL   []string
	Keys  bool // drop the key's uniqueness first
	Fails []audit.Invariant
}{
	{"stock lost", []string{"UPDATE skus SET stock = stock - 1 WHERE id = %[1]d"},
		false, []audit.Invariant{audit.StockAddsUp}},
	{"stock negative", []string{"UPDATE skus SET stock = -1, total_stock = sold - 1 WHERE id = %[1]d"},
		false, []audit.Invariant{audit.StockNonNegative}},
	{"a unit sold without an order", []string{"UPDATE skus SET stock = stock - 1, sold = sold + 1 WHERE id = %[1]d"},
		false, []audit.Invariant{audit.UnitsHaveOrders}},
	{"a unit returned twice", []string{"UPDATE skus SET stock = stock + 1, sold = sold - 1 WHERE id = %[1]d"},
		false, []audit.Invariant{audit.OrdersHaveUnits}},
	{"order cancelled without returning its unit", []string{"UPDATE orders SET status = 'cancelled', settled_at = expires_at WHERE id = %[2]d"},
		false, []audit.Invariant{audit.UnitsHaveOrders, audit.NoOrphanHolding, audit.SettledOnce}},
	{"cancelled order revived", []string{"UPDATE orders SET status = 'paid' WHERE id = %[3]d"},
		false, []audit.Invariant{audit.OrdersHaveUnits, audit.HoldingsMatchOrders}},
	{"holding short", []string{"UPDATE user_purchases SET quantity = 1 WHERE sku_id = %[1]d AND user_id = 'b'"},
		false, []audit.Invariant{audit.HoldingsMatchOrders}},
	{"returned unit kept its quota", []string{"INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (%[1]d, 'c', 1, 2)"},
		false, []audit.Invariant{audit.NoOrphanHolding}},
	{"user over the limit", []string{
		"INSERT INTO orders (sku_id, user_id, quantity, created_at, status) VALUES (%[1]d, 'b', 1, NOW(6), 'paid')",
		"UPDATE skus SET stock = stock - 1, sold = sold + 1 WHERE id = %[1]d",
		"UPDATE user_purchases SET quantity = 3 WHERE sku_id = %[1]d AND user_id = 'b'"},
		false, []audit.Invariant{audit.WithinLimit}},
	{"expired before it was due", []string{"UPDATE orders SET settled_at = expires_at - INTERVAL 1 SECOND WHERE id = %[4]d"},
		false, []audit.Invariant{audit.SettledOnce}},
	{"pending but settled", []string{"UPDATE orders SET settled_at = created_at WHERE sku_id = %[1]d AND user_id = 'b'"},
		false, []audit.Invariant{audit.SettledOnce}},
	{"idempotency key used twice by one buyer", []string{
		"INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at, status) SELECT sku_id, user_id, 1, idempotency_key, NOW(6), 'paid' FROM orders WHERE id = %[2]d",
		"UPDATE skus SET stock = stock - 1, sold = sold + 1 WHERE id = %[1]d",
		"UPDATE user_purchases SET quantity = 2 WHERE sku_id = %[1]d AND user_id = 'a'"},
		true, []audit.Invariant{audit.IdempotencyUnique}},
	{"one key, two buyers: no duplicate", []string{
		"INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at, status) SELECT sku_id, 'f', 1, idempotency_key, NOW(6), 'paid' FROM orders WHERE id = %[2]d",
		"UPDATE skus SET stock = stock - 1, sold = sold + 1 WHERE id = %[1]d",
		"INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (%[1]d, 'f', 1, 2)"},
		true, nil},
}

// TestAudit_Tampered: each tampered SKU fails exactly the invariants its
// tampering breaks, and the SKUs sold beside it none.
func TestAudit_Tampered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db, s := open(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	for _, tc := range tampers {
		t.Run(tc.Name, func(t *testing.T) {
			id, orders := sale(t, s, at)
			bystander, _ := sale(t, s, at)
			if tc.Keys {
				dropKeyUniqueness(t, db)
			}
			stmts := make([]string, len(tc.SQL))
			for i, q := range tc.SQL {
				stmts[i] = fmt.Sprintf(q, id, orders["a"][0], orders["c"][0], orders["e"][0])
			}
			tamper(t, db, stmts...)
			r, err := audit.SKU(ctx, db, id)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Failed(); !slices.Equal(got, tc.Fails) {
				t.Errorf("SKU(%d) fails %v; want %v\n%+v", id, got, tc.Fails, r.Failures)
			}
			if b, err := audit.SKU(ctx, db, bystander); err != nil || !b.OK() {
				t.Errorf("SKU(%d), untouched = %+v, %v; want OK", bystander, b.Failures, err)
			}
		})
	}
}

// TestAudit_NotFound: an unknown SKU is ErrNotFound, not a report.
func TestAudit_NotFound(t *testing.T) {
	t.Parallel()
	_, db, _ := open(t)
	if _, err := audit.SKU(context.Background(), db, 404); err == nil || !errors.Is(err, audit.ErrNotFound) {
		t.Errorf("SKU(404) = %v; want ErrNotFound", err)
	}
}
