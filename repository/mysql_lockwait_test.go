package repository

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

// A batch's row-lock wait is its transaction's alone: the statements that
// later draw the same pooled connection (a restock, an edit, pay, cancel,
// expiry, the COMMIT read-back) wait as long as the server's default,
// bounded by their own context, whatever ran on the connection before. A
// restock behind a row held for 2s succeeds on a fresh pool and after a
// round (1s wait) ran on its one connection alike.
func TestLockWait_RestockBehindAHeldRowWaitsAsOnAFreshPool(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	holderDB := testenv.DB(t, dsn)
	for _, before := range []string{"fresh pool", "after a round", "after a batch", "after a failed round"} {
		t.Run(before, func(t *testing.T) {
			s := NewMySQL(testenv.DB(t, dsn))
			s.sql.SetMaxOpenConns(1) // what ran before, and the restock, on one session
			ctx := context.Background()
			sku := newSKU(t, s, 10)
			switch before {
			case "after a round":
				if _, err := s.CommitRound(ctx, []service.Batch{newMember(sku.ID, "r").b}); err != nil {
					t.Fatal(err)
				}
			case "after a batch":
				bctx, cancel := context.WithTimeout(ctx, 3*time.Second) // a wait of 3s
				_, err := s.CommitBatch(bctx, newMember(sku.ID, "b").b)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
			case "after a failed round": // rolled back: its row was held
				held := newSKU(t, s, 10)
				tx := testenv.HoldRow(t, holderDB, held.ID)
				if _, err := s.CommitRound(ctx, []service.Batch{newMember(held.ID, "f").b}); err == nil {
					t.Fatal("a round on a held row committed")
				}
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
			}
			var session, global int
			if err := s.db.Raw("SELECT @@SESSION.innodb_lock_wait_timeout, @@GLOBAL.innodb_lock_wait_timeout").Row().Scan(&session, &global); err != nil {
				t.Fatal(err)
			}
			if session != global {
				t.Errorf("a GORM statement %s waits %ds for a row lock; want the server's default %ds", before, session, global)
			}

			var conn int64 // the pool's one connection, which the restock draws
			if err := s.sql.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&conn); err != nil {
				t.Fatal(err)
			}
			holder := testenv.HoldRow(t, holderDB, sku.ID)
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			restocked := make(chan error, 1)
			go func() {
				_, _, err := s.SetStock(rctx, sku.ID, 50)
				restocked <- err
			}()
			if err := waitLockWaitFor(ctx, holderDB, conn, 2*time.Second, restocked); err != nil {
				t.Fatalf("restock behind a held row %s: %v; want it to wait for the row", before, err)
			}
			if err := holder.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := <-restocked; err != nil {
				t.Fatalf("restock %s, once the row was let go = %v; want it done", before, err)
			}
			if got, err := s.SKU(ctx, sku.ID); err != nil || got.Stock != 50 {
				t.Errorf("stock after the restock %s = %d, %v; want 50", before, got.Stock, err)
			}
		})
	}
}

// waitLockWaitFor returns nil once the server reports that connection
// conn has waited d for a row lock, or what ended the waiter (sent on done)
// first. It polls the server, bounded; InnoDB refreshes
// information_schema.innodb_trx at most every 0.1s.
func waitLockWaitFor(ctx context.Context, db *gorm.DB, conn int64, d time.Duration, done <-chan error) error {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		var n int64
		if err := db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM information_schema.innodb_trx
			WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT' AND trx_wait_started <= NOW() - INTERVAL ? MICROSECOND`,
			conn, d.Microseconds()).Row().Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		select {
		case err := <-done:
			if err == nil {
				return fmt.Errorf("done before it had waited %v", d)
			}
			return fmt.Errorf("ended before it had waited %v: %w", d, err)
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("connection %d did not wait %v for a row lock within 30s", conn, d)
		}
	}
}
