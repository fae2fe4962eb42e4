package repository_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// bigSKU is a SKU with room for a buyer at the largest per-user limit
// twice over, and a batch that gave buyer "big" that limit whole.
func bigSKU(t *testing.T, s store) service.BatchResult {
	t.Helper()
	now := time.Now().UTC()
	sku, err := s.CreateSKU(context.Background(), service.SKU{Name: "big", TotalStock: 3 * service.MaxQuantity, Stock: 3 * service.MaxQuantity,
		PerUserLimit: service.MaxQuantity, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CommitBatch(context.Background(), bigBatch(sku.ID, "big"))
	if err != nil || res.Outcomes[0].Err != nil {
		t.Fatalf("first batch = %v, %+v", err, res.Outcomes)
	}
	return res
}

// bigBatch asks the largest quantity for each of users, then one unit for
// "small".
func bigBatch(skuID int64, users ...string) service.Batch {
	b := service.Batch{SKUID: skuID, Now: time.Now().UTC().Truncate(time.Microsecond)}
	for _, u := range users {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: skuID, UserID: u, Quantity: service.MaxQuantity})
	}
	return b
}

// checkBigAnswers: "big", at the limit, is refused its second 2^30 units
// (limit_exceeded, as the reads decide); "small" gets its order; the SKU's
// books show the one sale.
func checkBigAnswers(t *testing.T, db *gorm.DB, skuID int64, res service.BatchResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("batch with a buyer at the limit asking 2^30 more = %v; want each request answered", err)
	}
	if got := res.Outcomes[0].Err; !errors.Is(got, service.ErrLimitExceeded) {
		t.Errorf("big's second 2^30 units = %v; want ErrLimitExceeded", got)
	}
	if out := res.Outcomes[1]; out.Err != nil || !out.Placed.Created {
		t.Errorf("small's unit = %+v; want a new order", out)
	}
	if sold, _, orders := testenv.SoldAndOrders(t, db, skuID); sold != service.MaxQuantity+1 || orders != 2 {
		t.Errorf("sold %d, %d orders; want %d, 2", sold, orders, service.MaxQuantity+1)
	}
}

// A buyer holding 2^30 units who asks 2^30 more would hold more than an
// INT column can (MySQL error 1264): decided on the known row, which
// takes every holding as new, the batch must be decided again on its
// reads, and answer that buyer limit_exceeded and the others as usual.
// No single request fails its batch.
func TestCommitBatch_HoldingPastTheColumnsRangeFailsOnlyItsRequest(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			for _, known := range []bool{true, false} {
				first := bigSKU(t, s)
				b := bigBatch(first.SKU.ID, "big")
				b.Requests = append(b.Requests, service.OrderRequest{SKUID: first.SKU.ID, UserID: "small", Quantity: 1})
				if known {
					b.Known = &first.SKU
				}
				res, err := s.CommitBatch(context.Background(), b)
				checkBigAnswers(t, db, first.SKU.ID, res, err)
			}
		})
	}
}

// The same in a round decided on known rows: the round is decided again
// on its reads.
func TestCommitRound_HoldingPastTheColumnsRangeIsReRead(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db)
	first := bigSKU(t, s)
	b := bigBatch(first.SKU.ID, "big")
	b.Requests = append(b.Requests, service.OrderRequest{SKUID: first.SKU.ID, UserID: "small", Quantity: 1})
	b.Known = &first.SKU
	out, err := s.CommitRound(context.Background(), []service.Batch{b})
	if err != nil {
		t.Fatalf("round = %v; want each request answered", err)
	}
	checkBigAnswers(t, db, first.SKU.ID, out[0].BatchResult, out[0].Err)
}

// Decided on reads that another transaction's commit made stale (it gave
// "big" 2^30 units meanwhile), a batch's holding upsert meets the same
// overflow: the batch is committed request by request on fresh reads, so
// "big" alone is refused.
func TestCommitBatch_StaleReadPastTheColumnsRangeFailsOnlyItsRequest(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	db := testenv.DB(t, dsn)
	skuID, res, err := commitBehindAStaleRead(t, dsn, repository.NewMySQL(db))
	checkBigAnswers(t, db, skuID, res, err)
}

// commitBehindAStaleRead commits, on s over dsn, a batch whose reads
// another writer's commit makes stale past the column's range, so that
// it is committed one by one; it returns the SKU and the batch's answer.
func commitBehindAStaleRead(t *testing.T, dsn string, s *repository.MySQL) (int64, service.BatchResult, error) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	sku, err := s.CreateSKU(ctx, service.SKU{Name: "big", TotalStock: 3 * service.MaxQuantity, Stock: 3 * service.MaxQuantity,
		PerUserLimit: service.MaxQuantity, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	// The other writer: big's 2^30 units, uncommitted until the batch has
	// read and waits for the row.
	other, err := testenv.DB(t, dsn).DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "UPDATE skus SET stock = stock - ?, sold = sold + ?, version = version + 1 WHERE id = ?", service.MaxQuantity, service.MaxQuantity, sku.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (sku_id, user_id, quantity, created_at, status) VALUES (?, 'big', ?, NOW(6), 'paid')", sku.ID, service.MaxQuantity); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (?, 'big', ?, ?)", sku.ID, service.MaxQuantity, service.MaxQuantity); err != nil {
		t.Fatal(err)
	}
	b := bigBatch(sku.ID, "big")
	b.Requests = append(b.Requests, service.OrderRequest{SKUID: sku.ID, UserID: "small", Quantity: 1})
	type answer struct {
		res service.BatchResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := s.CommitBatch(bctx, b)
		done <- answer{res, err}
	}()
	// The batch has read (big holds nothing) and its UPDATE waits for
	// the other writer's row lock.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		if err := other.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case a := <-done:
			t.Fatalf("the batch ended (%v) before waiting for the other writer's row", a.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch never waited for the other writer's row")
		}
		time.Sleep(150 * time.Millisecond) // polling a server state, bounded above; InnoDB refreshes it every 0.1s
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	a := <-done
	return sku.ID, a.res, a.err
}
