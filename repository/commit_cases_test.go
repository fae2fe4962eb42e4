package repository_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// store is what the tests ask of either store: the engine's commits and
// what the domain reads and writes.
type store interface {
	committer
	service.OrderReader
	service.CatalogStore
	service.SKUOrders
	service.LifecycleStore
}

// committer is engine.Committer, spelled out so that the tests of
// repository need not import the engine.
type committer interface {
	CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error)
	CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error)
	AdoptFence(ctx context.Context, id, from, to int64) (bool, error)
}

// backend is one database and its store: the batch commit is written
// once for MySQL (raw multi-statement SQL) and once for SQLite (GORM), and
// both must pass the same cases.
type backend struct {
	name string
	open func(t *testing.T) (*gorm.DB, store)
}

var backends = []backend{
	{"mariadb", openMariaDB},
	{"sqlite", openSQLite},
}

func openMariaDB(t *testing.T) (*gorm.DB, store) {
	db := testenv.DB(t, testenv.Database(t))
	return db, repository.NewMySQL(db)
}

func openSQLite(t *testing.T) (*gorm.DB, store) {
	t.Helper()
	db, err := database.OpenSQLite(filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(db) })
	if err := database.Migrate(context.Background(), db, "up", io.Discard); err != nil {
		t.Fatal(err)
	}
	return db, repository.NewSQLite(db)
}

// errReplayed is a wanted outcome: the order placed earlier under the same
// idempotency key, not a new one.
var errReplayed = errors.New("replayed")

type buy struct {
	user string
	qty  int64
	key  string // idempotency key, "" for none
	want error  // nil: a new order; errReplayed (a replay); or the domain error
}

type commitStep struct {
	fence    int64
	restock  int64 // set the stock to this before the step (0: don't)
	buys     []buy
	batchErr error // the whole batch's error; then buys' wants are not checked
}

func TestCommitBatch_Cases(t *testing.T) {
	t.Parallel()
	type window int
	const (
		open window = iota
		notYet
		closed
	)
	tests := []struct {
		name         string
		stock, limit int64
		window       window
		steps        []commitStep
		sold         int64
	}{
		{name: "first come, first served until the stock runs out", stock: 3, limit: 5, sold: 3, steps: []commitStep{
			{buys: []buy{{"a", 1, "", nil}, {"b", 2, "", nil}, {"c", 1, "", service.ErrSoldOut}}},
			{buys: []buy{{"d", 1, "", service.ErrSoldOut}}},
		}},
		{name: "a quantity larger than what is left does not block smaller ones", stock: 3, limit: 5, sold: 3, steps: []commitStep{
			{buys: []buy{{"a", 2, "", nil}, {"b", 2, "", service.ErrInsufficientStock}, {"c", 1, "", nil}}},
		}},
		{name: "per-user limit within a batch and across batches", stock: 10, limit: 2, sold: 4, steps: []commitStep{
			{buys: []buy{{"a", 1, "", nil}, {"b", 2, "", nil}, {"b", 1, "", service.ErrLimitExceeded}}},
			{buys: []buy{{"a", 2, "", service.ErrLimitExceeded}, {"a", 1, "", nil}, {"a", 1, "", service.ErrLimitExceeded}}},
		}},
		{name: "idempotent replays within a batch and across batches", stock: 10, limit: 5, sold: 2, steps: []commitStep{
			{buys: []buy{{"a", 1, "k1", nil}, {"a", 1, "k1", errReplayed}, {"b", 1, "k2", nil}}},
			{buys: []buy{{"a", 1, "k1", errReplayed}, {"b", 1, "k2", errReplayed}}},
		}},
		{name: "a replay after the stock ran out, behind a new buyer who took the last unit", stock: 2, limit: 5, sold: 2, steps: []commitStep{
			{buys: []buy{{"a", 1, "k1", nil}}},
			{buys: []buy{{"b", 1, "", nil}, {"a", 1, "k1", errReplayed}, {"c", 1, "k2", service.ErrSoldOut}}},
		}},
		{name: "an idempotency key reused for another request", stock: 10, limit: 5, sold: 1, steps: []commitStep{
			{buys: []buy{{"a", 1, "k", nil}, {"a", 2, "k", service.ErrIdempotencyConflict}}},
			{buys: []buy{{"a", 2, "k", service.ErrIdempotencyConflict}}},
		}},
		{name: "keys are the buyer's own: the same key of two buyers is two orders", stock: 10, limit: 5, sold: 3, steps: []commitStep{
			{buys: []buy{{"b", 1, "k", nil}, {"a", 1, "k", nil}}},
			{buys: []buy{{"c", 1, "k", nil}, {"a", 1, "k", errReplayed}, {"b", 2, "k", service.ErrIdempotencyConflict}}},
		}},
		{name: "sale not open yet", stock: 10, limit: 5, window: notYet, steps: []commitStep{
			{buys: []buy{{"a", 1, "", service.ErrSaleNotActive}, {"b", 1, "k", service.ErrSaleNotActive}}},
		}},
		{name: "sale closed", stock: 10, limit: 5, window: closed, steps: []commitStep{
			{buys: []buy{{"a", 1, "", service.ErrSaleNotActive}}},
		}},
		{name: "a stale fence writes nothing; an equal fence is the same holder", stock: 10, limit: 5, sold: 2, steps: []commitStep{
			{fence: 100, buys: []buy{{"a", 1, "", nil}}},
			{fence: 99, buys: []buy{{"b", 1, "", nil}}, batchErr: service.ErrStaleFence},
			{fence: 100, buys: []buy{{"c", 1, "", nil}}},
		}},
		{name: "a restock between batches", stock: 3, limit: 5, sold: 4, steps: []commitStep{
			{buys: []buy{{"a", 2, "", nil}}},
			{restock: 2, buys: []buy{{"b", 1, "", nil}, {"c", 1, "", nil}, {"d", 1, "", service.ErrSoldOut}}},
		}},
	}
	// Each case also runs as a lock holder's worker runs it: every batch
	// brings the SKU as the previous one left it (Batch.Known), so that
	// the store may decide it without reading; the answers must be the
	// same, whatever changed in between.
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			ctx := context.Background()
			for i, tt := range tests {
				for _, chained := range []bool{false, true} {
					name := tt.name
					if chained {
						name += ", each batch bringing the known row"
						i += len(tests) // its own idempotency keys
					}
					t.Run(name, func(t *testing.T) {
						now := time.Now().UTC().Truncate(time.Microsecond)
						sku := service.SKU{Name: "case", TotalStock: tt.stock, Stock: tt.stock, PerUserLimit: tt.limit, CreatedAt: now, UpdatedAt: now}
						switch tt.window {
						case notYet:
							at := now.Add(time.Hour)
							sku.StartsAt = &at
						case closed:
							at := now.Add(-time.Hour)
							sku.EndsAt = &at
						}
						sku, err := s.CreateSKU(ctx, sku)
						if err != nil {
							t.Fatal(err)
						}
						ids := map[[2]string]int64{} // buyer and idempotency key → order id
						var known *service.SKU
						total := tt.stock // stock + sold, restocks included
						for j, st := range tt.steps {
							if st.restock > 0 {
								restocked, _, err := s.SetStock(ctx, sku.ID, st.restock)
								if err != nil {
									t.Fatal(err)
								}
								total = restocked.TotalStock
							}
							b := service.Batch{SKUID: sku.ID, Fence: st.fence, Now: time.Now().UTC().Truncate(time.Microsecond)}
							if chained {
								b.Known = known
							}
							for _, by := range st.buys {
								key := by.key
								if key != "" {
									key = fmt.Sprintf("case%d-%s", i, key)
								}
								b.Requests = append(b.Requests, service.OrderRequest{SKUID: sku.ID, UserID: by.user, Quantity: by.qty, IdempotencyKey: key})
							}
							res, err := s.CommitBatch(ctx, b)
							if err == nil {
								known = &res.SKU
							}
							if st.batchErr != nil || err != nil {
								if !errors.Is(err, st.batchErr) || st.batchErr == nil {
									t.Fatalf("step %d: CommitBatch = %v; want %v", j, err, st.batchErr)
								}
								continue
							}
							for k, by := range st.buys {
								out := res.Outcomes[k]
								switch {
								case by.want == nil && (out.Err != nil || !out.Placed.Created || out.Placed.Order.ID == 0):
									t.Errorf("step %d request %d = %+v; want a new order", j, k, out)
								case by.want == errReplayed && (out.Err != nil || out.Placed.Created || out.Placed.Order.ID != ids[[2]string{by.user, by.key}]):
									t.Errorf("step %d request %d = %+v; want the order %d replayed", j, k, out, ids[[2]string{by.user, by.key}])
								case by.want != nil && by.want != errReplayed && !errors.Is(out.Err, by.want):
									t.Errorf("step %d request %d = %v; want %v", j, k, out.Err, by.want)
								}
								if by.want == nil && by.key != "" {
									ids[[2]string{by.user, by.key}] = out.Placed.Order.ID
								}
							}
						}
						assertBooks(t, db, sku.ID, total, tt.sold, tt.limit)
						got, err := s.SKU(ctx, sku.ID)
						if err != nil {
							t.Fatal(err)
						}
						if known != nil && (known.Stock != got.Stock || known.Sold != got.Sold || known.Version != got.Version || known.Fence != got.Fence) {
							t.Errorf("the last batch left %+v; the database holds %+v", *known, got)
						}
					})
				}
			}
		})
	}
}

// assertBooks checks a SKU's invariants: stock + sold is the initial
// stock, sold is wantSold, every unit sold has its order row, and no user
// holds more than the limit or other than their orders.
func assertBooks(t *testing.T, db *gorm.DB, skuID, initial, wantSold, limit int64) {
	t.Helper()
	var stock, sold, ordered, orders, overLimit, mismatched int64
	if err := db.Raw("SELECT stock, sold FROM skus WHERE id = ?", skuID).Row().Scan(&stock, &sold); err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT COUNT(*), COALESCE(SUM(quantity), 0) FROM orders WHERE sku_id = ?", skuID).Row().Scan(&orders, &ordered); err != nil {
		t.Fatal(err)
	}
	if err := db.Raw(`SELECT COUNT(*) FROM (SELECT user_id, SUM(quantity) AS q FROM orders WHERE sku_id = ? GROUP BY user_id) o
		WHERE o.q > ?`, skuID, limit).Row().Scan(&overLimit); err != nil {
		t.Fatal(err)
	}
	if err := db.Raw(`SELECT COUNT(*) FROM user_purchases p WHERE p.sku_id = ? AND p.quantity <>
		(SELECT COALESCE(SUM(o.quantity), 0) FROM orders o WHERE o.sku_id = p.sku_id AND o.user_id = p.user_id)`, skuID).Row().Scan(&mismatched); err != nil {
		t.Fatal(err)
	}
	if sold != wantSold || stock+sold != initial || ordered != sold || overLimit != 0 || mismatched != 0 {
		t.Errorf("sku %d: stock %d sold %d (want %d of %d), %d orders of %d units, %d users over the limit, %d holdings not matching orders",
			skuID, stock, sold, wantSold, initial, orders, ordered, overLimit, mismatched)
	}
}
