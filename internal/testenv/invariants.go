package testenv

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/audit"
)

// CheckInvariants asserts docs/design.md's invariants 1–4, 10 and 20 for
// a SKU (stock never negative, stock + sold == total, the live orders —
// pending and paid — hold exactly the units sold, no user over the
// per-user limit, holdings agree with the live and waiting orders; the
// SKU counts its waiting orders, each buyer has one at most, and none
// that the free stock fits waits while the sale is on) and returns the
// units sold. Cancelled, expired and lapsed orders count nowhere; a
// waiting order holds no unit but counts toward its buyer's limit.
// On MySQL/MariaDB it also runs the audit (internal/audit) and fails on
// each invariant it finds broken. A query that fails fails the test: read
// as zero, it would pass.
func CheckInvariants(t testing.TB, db *gorm.DB, skuID int64) int64 {
	t.Helper()
	scan := func(what string, dest any, query string, args ...any) {
		t.Helper()
		if err := db.Raw(query, args...).Scan(dest).Error; err != nil {
			t.Fatalf("CheckInvariants(sku %d): reading %s: %v", skuID, what, err)
		}
	}
	var sku struct {
		TotalStock, Stock, Sold, PerUserLimit, Waiters int64
		StartsAt, EndsAt                               *time.Time
	}
	scan("the sku", &sku, "SELECT total_stock, stock, sold, per_user_limit, waiters, starts_at, ends_at FROM skus WHERE id = ?", skuID)
	now := time.Now()
	active := (sku.StartsAt == nil || !now.Before(*sku.StartsAt)) && (sku.EndsAt == nil || now.Before(*sku.EndsAt))
	var orders struct{ N, Units int64 }
	scan("the live orders", &orders, "SELECT COUNT(*) AS n, COALESCE(SUM(quantity), 0) AS units FROM orders WHERE sku_id = ? AND status IN ('pending', 'paid')", skuID)
	if sku.Stock < 0 {
		t.Errorf("stock = %d; want >= 0", sku.Stock)
	}
	if sku.Stock+sku.Sold != sku.TotalStock {
		t.Errorf("stock %d + sold %d != total %d", sku.Stock, sku.Sold, sku.TotalStock)
	}
	if orders.Units != sku.Sold {
		t.Errorf("orders hold %d units (%d rows); sold = %d", orders.Units, orders.N, sku.Sold)
	}
	var over int64
	scan("the users over the limit", &over, "SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE sku_id = ? AND status IN ('pending', 'paid', 'waiting') GROUP BY user_id HAVING SUM(quantity) > ?) x", skuID, sku.PerUserLimit)
	if over != 0 {
		t.Errorf("%d users over the per-user limit %d", over, sku.PerUserLimit)
	}
	var mismatched int64
	scan("the holdings", &mismatched, `SELECT COUNT(*) FROM (SELECT user_id, SUM(quantity) q, SUM(CASE WHEN status = 'waiting' THEN 1 ELSE 0 END) w
		FROM orders WHERE sku_id = ? AND status IN ('pending', 'paid', 'waiting') GROUP BY user_id) o
		LEFT JOIN user_purchases p ON p.sku_id = ? AND p.user_id = o.user_id WHERE p.quantity IS NULL OR p.quantity <> o.q OR p.waiting <> o.w`, skuID, skuID)
	if mismatched != 0 {
		t.Errorf("%d users whose holdings disagree with their orders", mismatched)
	}
	var orphans int64 // holdings of users without a live order
	scan("the orphaned holdings", &orphans, `SELECT COUNT(*) FROM user_purchases p WHERE p.sku_id = ? AND NOT EXISTS
		(SELECT 1 FROM orders o WHERE o.sku_id = p.sku_id AND o.user_id = p.user_id AND o.status IN ('pending', 'paid', 'waiting'))`, skuID)
	if orphans != 0 {
		t.Errorf("%d holdings without a live or waiting order (a returned unit kept its buyer's quota)", orphans)
	}
	var waiting struct{ N, Fitting int64 }
	scan("the waiting orders", &waiting, "SELECT COUNT(*) AS n, COALESCE(SUM(CASE WHEN quantity <= ? THEN 1 ELSE 0 END), 0) AS fitting FROM orders WHERE sku_id = ? AND status = 'waiting'", sku.Stock, skuID)
	if waiting.N != sku.Waiters {
		t.Errorf("%d waiting orders; the sku counts %d", waiting.N, sku.Waiters)
	}
	if active && waiting.Fitting > 0 {
		t.Errorf("%d waiting orders fit the %d units left free: a returned unit was not given to its waiter", waiting.Fitting, sku.Stock)
	}
	if db.Dialector.Name() == "mysql" { // the audit reads MySQL/MariaDB
		audited(t, db, skuID)
	}
	return sku.Sold
}

// audited asserts that `seckill audit` finds the SKU clean: its every
// invariant (internal/audit), the waitlist's order among them.
func audited(t testing.TB, db *gorm.DB, skuID int64) {
	t.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatalf("CheckInvariants(sku %d): %v", skuID, err)
	}
	r, err := audit.SKU(context.Background(), sqlDB, skuID)
	if err != nil {
		t.Fatalf("CheckInvariants(sku %d): audit: %v", skuID, err)
	}
	for _, f := range r.Failures {
		t.Errorf("audit of sku %d: %s: %s", skuID, f.Invariant, f.Detail)
	}
}
