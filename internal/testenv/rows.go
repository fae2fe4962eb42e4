package testenv

import (
	"context"
	"database/sql"
	"testing"

	"gorm.io/gorm"
)

// HoldRow locks a SKU's row in a transaction of its own until the test
// rolls it back (or ends).
func HoldRow(t testing.TB, db *gorm.DB, skuID int64) *sql.Tx {
	t.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := sqlDB.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(context.Background(), "SELECT id FROM skus WHERE id = ? FOR UPDATE", skuID); err != nil {
		t.Fatal(err)
	}
	return tx
}

// SoldAndOrders reads what the database holds for a SKU: its sold and
// stock columns, and how many order rows it has.
func SoldAndOrders(t testing.TB, db *gorm.DB, skuID int64) (sold, stock, orders int64) {
	t.Helper()
	if err := db.Raw("SELECT sold, stock FROM skus WHERE id = ?", skuID).Row().Scan(&sold, &stock); err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ?", skuID).Row().Scan(&orders); err != nil {
		t.Fatal(err)
	}
	return sold, stock, orders
}
