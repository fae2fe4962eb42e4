package database_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
)

// A COMMIT that no context bounds (database/sql's Tx.Commit ignores its
// context once sent, as an admin transaction's does) still ends when its
// reply never comes: Options.IOTimeout bounds every read.
func TestOpenMySQL_IOTimeoutBoundsACommitWithoutReply(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	proxied, proxy := testenv.ThroughMySQLProxy(t, dsn)
	const bound = time.Second // production's is mysql.io_timeout, 60s
	db, err := database.OpenMySQL(proxied, database.Options{MaxOpenConns: 2, MaxIdleConns: 2, ConnMaxLife: time.Minute, IOTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(db) })
	t.Cleanup(proxy.Cut) // first: a stuck COMMIT must not hang the cleanup

	committed := proxy.StallAtCommit()
	done := make(chan error, 1)
	go func() {
		done <- db.WithContext(context.Background()).Transaction(func(tx *gorm.DB) error {
			return tx.Exec("INSERT INTO skus (name, total_stock, stock, created_at, updated_at) VALUES ('x', 1, 1, NOW(6), NOW(6))").Error
		})
	}()
	<-committed
	select {
	case err := <-done:
		if err == nil {
			t.Error("a COMMIT whose reply never came reported success")
		}
	case <-time.After(20 * bound):
		t.Fatalf("a COMMIT whose reply never came was still waiting after %v (io timeout %v)", 20*bound, bound)
	}
	var n int64
	if err := testenv.DB(t, dsn).Raw("SELECT COUNT(*) FROM skus").Row().Scan(&n); err != nil || n != 1 {
		t.Errorf("skus = %d, %v; want 1 (the COMMIT reached the server)", n, err)
	}
}
