package audit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/audit"
)

// TestBegin_ReadOnly: the server refuses any write in the audit's
// transaction (ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION), so the audit,
// which reads only through it, needs nothing beyond SELECT.
func TestBegin_ReadOnly(t *testing.T) {
	t.Parallel()
	_, db, _ := open(t)
	ctx := context.Background()
	tx, err := audit.Begin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, "INSERT INTO skus (name, total_stock, stock, created_at, updated_at) VALUES ('x', 1, 1, NOW(6), NOW(6))")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1792 {
		t.Fatalf("INSERT in the audit's transaction = %v; want error 1792 (read-only transaction)", err)
	}
}
