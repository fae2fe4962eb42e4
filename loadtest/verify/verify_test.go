package verify_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/loadtest/verify"
	"github.com/seckill/seckill/migrations"
)

// testDB is this package's own database, created by TestMain with the
// service's schema and dropped afterwards.
var testDB *sql.DB

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	if err != nil {
		fmt.Fprintf(os.Stderr, "verify tests: SECKILL_TEST_MYSQL_DSN: %v\n", err)
		return 1
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	cfg.MultiStatements = true
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		fmt.Fprintf(os.Stderr, "verify tests: %v\n", err)
		return 1
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "verify tests need MariaDB/MySQL at %s (set SECKILL_TEST_MYSQL_DSN): %v\n", cfg.Addr, err)
		return 1
	}

	name := testenv.Name("seckill_verify_test_")
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		fmt.Fprintf(os.Stderr, "verify tests: create database: %v\n", err)
		return 1
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			fmt.Fprintf(os.Stderr, "verify tests: drop database %s: %v\n", name, err)
		}
	}()

	cfg.DBName = name
	testDB, err = sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		fmt.Fprintf(os.Stderr, "verify tests: %v\n", err)
		return 1
	}
	defer testDB.Close()
	goose.SetBaseFS(migrations.FS)
	goose.SetLogger(goose.NopLogger())
	if err := goose.SetDialect("mysql"); err != nil {
		fmt.Fprintf(os.Stderr, "verify tests: %v\n", err)
		return 1
	}
	if err := goose.UpContext(ctx, testDB, "mysql"); err != nil {
		fmt.Fprintf(os.Stderr, "verify tests: migrate: %v\n", err)
		return 1
	}
	return m.Run()
}

const (
	seedStock = 10
	seedLimit = 2
)

// seedSale creates a SKU of seedStock units, limit seedLimit, and sells
// sold units the way the service does: stock down, sold up, one order and
// a user_purchases row per buyer, in one transaction. Buyers u1 and u2 take
// two units each, later buyers one.
func seedSale(t *testing.T, sold int) int64 {
	t.Helper()
	var skuID int64
	if err := retryDeadlocks(func() (err error) { skuID, err = seedOnce(t.Name(), sold); return err }); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return skuID
}

func seedOnce(name string, sold int) (int64, error) {
	ctx := context.Background()
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	now := time.Now().UTC()
	res, err := tx.ExecContext(ctx, `INSERT INTO skus (name, total_stock, stock, sold, per_user_limit, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, name, seedStock, seedStock-sold, sold, seedLimit, now, now)
	if err != nil {
		return 0, fmt.Errorf("sku: %w", err)
	}
	skuID, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	left := sold
	for u := 1; left > 0; u++ {
		user := "u" + strconv.Itoa(u)
		n := 1
		if u <= 2 {
			n = min(2, left)
		}
		left -= n
		for i := range n {
			if err := insertOrder(tx, skuID, user, fmt.Sprintf("%d-%s-%d", skuID, user, i)); err != nil {
				return 0, err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (?, ?, ?, ?)`,
			skuID, user, n, seedLimit); err != nil {
			return 0, fmt.Errorf("purchase: %w", err)
		}
	}
	return skuID, tx.Commit()
}

// retryDeadlocks runs f again, a bounded number of times, while InnoDB
// picks it as a deadlock's victim (or times out its lock wait): the
// subtests seed and tamper in parallel on one database, and their
// statements lock neighbouring index ranges. A victim's transaction was
// rolled back whole, so running f again is safe.
func retryDeadlocks(f func() error) error {
	var err error
	for range 20 {
		var myErr *mysql.MySQLError
		if err = f(); !errors.As(err, &myErr) || (myErr.Number != 1213 && myErr.Number != 1205) {
			return err
		}
	}
	return err
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// buyOrder inserts one order row of one unit, and nothing else. An empty
// key stores NULL, as the service does for a request without one.
func buyOrder(t *testing.T, db *sql.DB, skuID int64, user, key string) {
	t.Helper()
	if err := retryDeadlocks(func() error { return insertOrder(db, skuID, user, key) }); err != nil {
		t.Fatalf("insert order: %v", err)
	}
}

func insertOrder(db execer, skuID int64, user, key string) error {
	var k sql.NullString
	if key != "" {
		k = sql.NullString{String: key, Valid: true}
	}
	_, err := db.ExecContext(context.Background(),
		`INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at) VALUES (?, ?, 1, ?, ?)`,
		skuID, user, k, time.Now().UTC())
	return err
}

func mustExec(t *testing.T, query string, args ...any) {
	t.Helper()
	var res sql.Result
	err := retryDeadlocks(func() (err error) {
		res, err = testDB.ExecContext(context.Background(), query, args...)
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		t.Fatalf("%s: changed %d rows (%v); the tamper did nothing", query, n, err)
	}
}

// TestCheckDB_tampered changes rows behind the service's back and expects
// the verifier to name exactly what was broken.
func TestCheckDB_tampered(t *testing.T) {
	tests := []struct {
		name    string
		sold    int
		soldOut bool
		tamper  func(t *testing.T, skuID int64)
		// clients, if set, edits the clients' record, which starts as
		// every seeded order acknowledged.
		clients func(c verify.Clients, seeded []verify.Order) verify.Clients
		want    []string
	}{
		{name: "clean sale", sold: seedStock, soldOut: true},
		{name: "clean sale still running", sold: 7},
		{
			name: "extra order", sold: seedStock, soldOut: true,
			tamper: func(t *testing.T, skuID int64) { buyOrder(t, testDB, skuID, "intruder", "") },
			want:   []string{verify.OrderWithoutDecrement, verify.PurchasesDisagreeWithOrders},
		},
		{
			name: "extra order with its purchase row", sold: seedStock, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				buyOrder(t, testDB, skuID, "intruder", "")
				mustExec(t, `INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (?, 'intruder', 1, ?)`, skuID, seedLimit)
			},
			want: []string{verify.OrderWithoutDecrement},
		},
		{
			name: "unit sold without an order", sold: seedStock - 1, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				mustExec(t, `UPDATE skus SET sold = sold + 1, stock = stock - 1 WHERE id = ?`, skuID)
			},
			want: []string{verify.UnitSoldWithoutOrder},
		},
		{
			name: "order deleted", sold: seedStock, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				mustExec(t, `DELETE FROM orders WHERE sku_id = ? AND user_id = 'u3'`, skuID)
				mustExec(t, `DELETE FROM user_purchases WHERE sku_id = ? AND user_id = 'u3'`, skuID)
			},
			want: []string{verify.UnitSoldWithoutOrder},
		},
		{
			// The CHECK on user_purchases refuses quantity > per_user_limit,
			// so the tamper raises the copied limit first.
			name: "user over the limit", sold: seedStock - 1, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				buyOrder(t, testDB, skuID, "u1", "")
				mustExec(t, `UPDATE user_purchases SET per_user_limit = 3, quantity = 3 WHERE sku_id = ? AND user_id = 'u1'`, skuID)
				mustExec(t, `UPDATE skus SET sold = sold + 1, stock = stock - 1 WHERE id = ?`, skuID)
			},
			want: []string{verify.UserOverLimit},
		},
		{
			name: "user over the limit through orders only", sold: seedStock, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				mustExec(t, `UPDATE orders SET user_id = 'u1' WHERE sku_id = ? AND user_id = 'u3'`, skuID)
			},
			want: []string{verify.UserOverLimit, verify.PurchasesDisagreeWithOrders},
		},
		{
			name: "oversold by a restock behind the service's back", sold: seedStock, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				mustExec(t, `UPDATE skus SET total_stock = total_stock + 1, sold = sold + 1 WHERE id = ?`, skuID)
				buyOrder(t, testDB, skuID, "late", "")
				mustExec(t, `INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (?, 'late', 1, ?)`, skuID, seedLimit)
			},
			want: []string{verify.Oversold, verify.TotalStockChanged, verify.NotSoldOut},
		},
		{
			name: "purchases drift from orders", sold: seedStock, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				mustExec(t, `UPDATE user_purchases SET quantity = 1 WHERE sku_id = ? AND user_id = 'u1'`, skuID)
			},
			want: []string{verify.PurchasesDisagreeWithOrders},
		},
		{name: "stock left over", sold: seedStock - 1, soldOut: true, want: []string{verify.NotSoldOut}},
		// The clients' record: by default every seeded order was
		// acknowledged to its buyer.
		{
			name: "every order acknowledged", sold: seedStock, soldOut: true,
			clients: func(c verify.Clients, _ []verify.Order) verify.Clients { return c },
		},
		{
			name: "acknowledged order lost", sold: seedStock, soldOut: true,
			clients: func(c verify.Clients, _ []verify.Order) verify.Clients {
				c.Acknowledged = append(c.Acknowledged, verify.Ack{OrderID: 1 << 40, UserID: "u9"})
				return c
			},
			want: []string{verify.AcknowledgedOrderMissing},
		},
		{
			name: "acknowledged order belongs to someone else", sold: seedStock, soldOut: true,
			clients: func(c verify.Clients, _ []verify.Order) verify.Clients {
				c.Acknowledged[0].UserID = "someone-else"
				return c
			},
			want: []string{verify.AcknowledgedOrderMissing},
		},
		{
			// Every table agrees: only the clients' record shows that
			// nobody placed this order.
			name: "consistent order nobody placed", sold: seedStock - 1, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				buyOrder(t, testDB, skuID, "ghost", "")
				mustExec(t, `INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (?, 'ghost', 1, ?)`, skuID, seedLimit)
				mustExec(t, `UPDATE skus SET sold = sold + 1, stock = stock - 1 WHERE id = ?`, skuID)
			},
			clients: func(c verify.Clients, _ []verify.Order) verify.Clients { return c },
			want:    []string{verify.PhantomOrder},
		},
		{
			name: "order of a buyer left without an answer", sold: seedStock - 1, soldOut: true,
			tamper: func(t *testing.T, skuID int64) {
				buyOrder(t, testDB, skuID, "ghost", "")
				mustExec(t, `INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (?, 'ghost', 1, ?)`, skuID, seedLimit)
				mustExec(t, `UPDATE skus SET sold = sold + 1, stock = stock - 1 WHERE id = ?`, skuID)
			},
			clients: func(c verify.Clients, _ []verify.Order) verify.Clients {
				c.Unsure = []string{"ghost"}
				return c
			},
		},
		{
			name: "refused after an unknown outcome but ordered", sold: seedStock, soldOut: true,
			clients: func(c verify.Clients, orders []verify.Order) verify.Clients {
				c.Refused = []verify.Refusal{{Key: orders[0].IdempotencyKey, UserID: orders[0].UserID, Code: "sold_out"}, {Key: "never-used", UserID: "u1", Code: "sold_out"}}
				return c
			},
			want: []string{verify.RefusedButOrdered},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			skuID := seedSale(t, tt.sold)
			seeded, err := verify.FromDB(context.Background(), testDB, skuID)
			if err != nil {
				t.Fatal(err)
			}
			if tt.tamper != nil {
				tt.tamper(t, skuID)
			}
			want := verify.Expect{InitialStock: seedStock, SoldOut: tt.soldOut}
			if tt.clients != nil {
				var c verify.Clients
				for _, o := range seeded.Orders {
					c.Acknowledged = append(c.Acknowledged, verify.Ack{OrderID: o.ID, UserID: o.UserID})
				}
				c = tt.clients(c, seeded.Orders)
				want.Clients = &c
			}
			rep, err := verify.CheckDB(context.Background(), testDB, skuID, want)
			if err != nil {
				t.Fatalf("CheckDB(sku %d) error: %v", skuID, err)
			}
			if got := rep.Names(); !slices.Equal(got, sorted(tt.want)) {
				t.Fatalf("CheckDB(sku %d) violations = %v; want %v\nreport: %v", skuID, got, sorted(tt.want), rep.Violations)
			}
			// Every message names its violation and the SKU, so a failing
			// run says what broke without a debugger.
			for _, v := range rep.Violations {
				if !strings.Contains(v.String(), v.Name) || !strings.Contains(v.Message, fmt.Sprintf("sku %d", skuID)) {
					t.Errorf("violation %q does not name itself and sku %d", v, skuID)
				}
			}
			if rep.OK() != (len(tt.want) == 0) {
				t.Errorf("Report.OK() = %v; want true iff no violation", rep.OK())
			}
		})
	}
}

func TestCheckDB_unknownSKU(t *testing.T) {
	t.Parallel()
	_, err := verify.CheckDB(context.Background(), testDB, 1<<50, verify.Expect{InitialStock: 1})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("CheckDB(unknown sku) error = %v; want not found", err)
	}
}

// TestCheck covers what the database's constraints make impossible to
// tamper with, so it can only be shown on a hand-made snapshot.
func TestCheck(t *testing.T) {
	sku := verify.SKU{ID: 7, TotalStock: 3, Stock: 0, Sold: 3, PerUserLimit: 1}
	orders := []verify.Order{{ID: 1, UserID: "a", Quantity: 1, IdempotencyKey: "k1"}, {ID: 2, UserID: "b", Quantity: 1, IdempotencyKey: "k2"}, {ID: 3, UserID: "c", Quantity: 1}}
	tests := []struct {
		name string
		snap verify.Snapshot
		want []string
	}{
		{name: "clean", snap: verify.Snapshot{SKU: sku, Orders: orders, HasTotal: true}},
		{
			name: "negative stock",
			snap: verify.Snapshot{SKU: verify.SKU{ID: 7, TotalStock: 3, Stock: -1, Sold: 4, PerUserLimit: 2}, HasTotal: true,
				Orders: append(slices.Clone(orders), verify.Order{ID: 4, UserID: "d", Quantity: 1})},
			want: []string{verify.NegativeStock, verify.Oversold, verify.NotSoldOut},
		},
		{
			name: "stock does not add up",
			snap: verify.Snapshot{SKU: verify.SKU{ID: 7, TotalStock: 3, Stock: 1, Sold: 3, PerUserLimit: 1}, Orders: orders, HasTotal: true},
			want: []string{verify.StockDoesNotAddUp, verify.NotSoldOut},
		},
		{
			name: "duplicate idempotency key",
			snap: verify.Snapshot{SKU: verify.SKU{ID: 7, TotalStock: 3, Stock: 0, Sold: 3, PerUserLimit: 2}, HasTotal: true,
				Orders: []verify.Order{orders[0], orders[1], {ID: 3, UserID: "b", Quantity: 1, IdempotencyKey: "k2"}}},
			want: []string{verify.DuplicateIdempotencyKey},
		},
		{
			name: "two buyers' own keys alike",
			snap: verify.Snapshot{SKU: sku, HasTotal: true, Orders: []verify.Order{orders[0], orders[1], {ID: 3, UserID: "c", Quantity: 1, IdempotencyKey: "k1"}}},
		},
		{
			name: "a cancelled and an expired order hold no units",
			snap: verify.Snapshot{SKU: sku, HasTotal: true, Orders: append(slices.Clone(orders),
				verify.Order{ID: 4, UserID: "d", Quantity: 1, Status: "cancelled"}, verify.Order{ID: 5, UserID: "a", Quantity: 1, Status: "expired"})},
		},
		{
			name: "a cancelled order whose unit was not returned",
			snap: verify.Snapshot{SKU: sku, HasTotal: true, Orders: []verify.Order{orders[0], orders[1], {ID: 3, UserID: "c", Quantity: 1, Status: "cancelled"}}},
			want: []string{verify.UnitSoldWithoutOrder},
		},
		{
			name: "api view without total stock",
			snap: verify.Snapshot{SKU: verify.SKU{ID: 7, Stock: 1, Sold: 2, PerUserLimit: 1}, Orders: orders[:2]},
			want: []string{verify.NotSoldOut},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := verify.Check(tt.snap, verify.Expect{InitialStock: 3, SoldOut: true})
			if got := rep.Names(); !slices.Equal(got, sorted(tt.want)) {
				t.Fatalf("Check() violations = %v; want %v\nreport: %v", got, sorted(tt.want), rep.Violations)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
