package repository_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// TestCommitBatch_OneRequestCannotFailItsBatch puts one hostile request,
// which the service's validation would have refused, among honest buyers
// of one batch, on a database that refuses its row: every honest buyer
// gets an order, the hostile request alone is refused, and the books add
// up. The PAD SPACE cases restore the columns' old collation, under which
// the database equates ids that Go tells apart.
func TestCommitBatch_OneRequestCannotFailItsBatch(t *testing.T) {
	t.Parallel()
	const (
		honest = 10
		stock  = 30
		limit  = 2
	)
	tests := []struct {
		name    string
		schema  string // run on the test database first
		earlier []service.OrderRequest
		hostile service.OrderRequest
		want    error
	}{
		{
			name:    "a user id longer than the column",
			hostile: service.OrderRequest{UserID: strings.Repeat("x", service.MaxUserIDLen+1), Quantity: 1},
			want:    service.ErrInvalid,
		},
		{
			name:    "an idempotency key longer than the column",
			hostile: service.OrderRequest{UserID: "mallory", Quantity: 1, IdempotencyKey: strings.Repeat("k", service.MaxIdempotencyKeyLen+1)},
			want:    service.ErrInvalid,
		},
		{
			name:    "a user id the database equates with one at the limit",
			schema:  "ALTER TABLE user_purchases MODIFY user_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL",
			earlier: []service.OrderRequest{{UserID: "mallory", Quantity: limit}},
			hostile: service.OrderRequest{UserID: "mallory ", Quantity: 1},
			want:    service.ErrLimitExceeded,
		},
		{
			name:    "an idempotency key the database equates with the buyer's earlier one",
			schema:  "ALTER TABLE orders MODIFY idempotency_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL",
			earlier: []service.OrderRequest{{UserID: "mallory", Quantity: 1, IdempotencyKey: "k"}},
			hostile: service.OrderRequest{UserID: "mallory", Quantity: 1, IdempotencyKey: "k "},
			want:    service.ErrIdempotencyConflict,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := testenv.DB(t, testenv.Database(t))
			if tt.schema != "" {
				if err := db.Exec(tt.schema).Error; err != nil {
					t.Fatal(err)
				}
			}
			s := repository.NewMySQL(db)
			ctx := context.Background()
			for _, path := range []string{"alone", "shared", "known"} {
				t.Run(path, func(t *testing.T) {
					scoped := func(r service.OrderRequest) service.OrderRequest { // keys of their own per path
						if r.IdempotencyKey != "" {
							r.IdempotencyKey = path + "/" + r.IdempotencyKey
						}
						return r
					}
					now := time.Now().UTC().Truncate(time.Microsecond)
					sku, err := s.CreateSKU(ctx, service.SKU{Name: "hostile", TotalStock: stock, Stock: stock, PerUserLimit: limit, CreatedAt: now, UpdatedAt: now})
					if err != nil {
						t.Fatal(err)
					}
					var before int64
					for _, r := range tt.earlier {
						r = scoped(r)
						r.SKUID = sku.ID
						res, err := s.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Now: now, Requests: []service.OrderRequest{r}})
						if err != nil || res.Outcomes[0].Err != nil {
							t.Fatalf("earlier order %+v = %+v, %v", r, res.Outcomes, err)
						}
						before += r.Quantity
					}
					b := service.Batch{SKUID: sku.ID, Now: time.Now().UTC().Truncate(time.Microsecond)}
					if path == "known" {
						known, err := s.SKU(ctx, sku.ID)
						if err != nil {
							t.Fatal(err)
						}
						b.Known = &known
					}
					hostileAt := honest / 2
					for i := range honest {
						if i == hostileAt {
							h := scoped(tt.hostile)
							h.SKUID = sku.ID
							b.Requests = append(b.Requests, h)
						}
						b.Requests = append(b.Requests, service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("honest-%d", i), Quantity: 1, IdempotencyKey: path + "/k"})
					}
					res, err := commitIn(ctx, s, b, path == "shared")
					if path == "shared" && err != nil {
						// A round the database refused committed nothing;
						// the service then commits its batches alone.
						res, err = s.CommitBatch(ctx, b)
					}
					if err != nil {
						t.Fatalf("CommitBatch(%d honest buyers and one hostile request) = %v; want each answered", honest, err)
					}
					for i, out := range res.Outcomes {
						switch {
						case i == hostileAt && !errors.Is(out.Err, tt.want):
							t.Errorf("the hostile request = %+v; want %v", out, tt.want)
						case i != hostileAt && (out.Err != nil || !out.Placed.Created || out.Placed.Order.ID == 0):
							t.Errorf("honest request %d = %+v; want a new order", i, out)
						}
					}
					if res.SKU.Stock != stock-before-honest || res.SKU.Sold != before+honest {
						t.Errorf("the batch says stock %d sold %d; want %d, %d", res.SKU.Stock, res.SKU.Sold, stock-before-honest, before+honest)
					}
					assertBooks(t, db, sku.ID, stock, before+honest, limit)
				})
			}
		})
	}
}

// TestIdsAreComparedByBytes: the database tells apart what the service
// tells apart, and an idempotency key is its buyer's own.
func TestIdsAreComparedByBytes(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Microsecond)
			sku, err := s.CreateSKU(ctx, service.SKU{Name: "bytes", TotalStock: 10, Stock: 10, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			b := service.Batch{SKUID: sku.ID, Now: now, Requests: []service.OrderRequest{
				{SKUID: sku.ID, UserID: "alice", Quantity: 1, IdempotencyKey: "order-1"},
				{SKUID: sku.ID, UserID: "alice ", Quantity: 1, IdempotencyKey: "order-1"},
				{SKUID: sku.ID, UserID: "bob", Quantity: 1, IdempotencyKey: "order-1"},
			}}
			res, err := s.CommitBatch(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			for i, out := range res.Outcomes {
				if out.Err != nil || !out.Placed.Created {
					t.Errorf("request %d (%q) = %+v; want a new order of its own", i, b.Requests[i].UserID, out)
				}
			}
			assertBooks(t, db, sku.ID, 10, 3, 1)
			for _, user := range []string{"alice", "alice ", "bob"} {
				list, err := s.OrdersByUser(ctx, user, 0, 10)
				if err != nil || len(list) != 1 || list[0].UserID != user {
					t.Errorf("OrdersByUser(%q) = %+v, %v; want its one order", user, list, err)
				}
				o, err := s.OrderByKey(ctx, user, "order-1")
				if err != nil || o.UserID != user {
					t.Errorf("OrderByKey(%q, order-1) = %+v, %v; want its own order", user, o, err)
				}
			}
			if o, err := s.OrderByKey(ctx, "carol", "order-1"); !errors.Is(err, service.ErrNotFound) {
				t.Errorf("OrderByKey(carol, order-1) = %+v, %v; want ErrNotFound: others' keys are not hers", o, err)
			}
			if list, err := s.OrdersByUser(ctx, "alice  ", 0, 10); err != nil || len(list) != 0 {
				t.Errorf("OrdersByUser(%q) = %+v, %v; want none", "alice  ", list, err)
			}
		})
	}
}

// TestMigration00004_DownAndUp takes the schema back before ids were
// compared by bytes and forward again, keeping every order; down refuses,
// changing nothing, while two buyers' orders share a key.
func TestMigration00004_DownAndUp(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Microsecond)
			sku, err := s.CreateSKU(ctx, service.SKU{Name: "migrate", TotalStock: 10, Stock: 10, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			buy := func(user, key string) error {
				res, err := s.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Now: now, Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: user, Quantity: 1, IdempotencyKey: key}}})
				if err == nil {
					err = res.Outcomes[0].Err
				}
				return err
			}
			orders := func() (n int64) {
				t.Helper()
				if err := db.Raw("SELECT COUNT(*) FROM orders").Row().Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			for _, o := range [][2]string{{"alice", "k1"}, {"bob", "k2"}, {"carol", "k1"}} {
				if err := buy(o[0], o[1]); err != nil {
					t.Fatalf("%s buys with key %s: %v", o[0], o[1], err)
				}
			}
			for _, m := range []string{"00007", "00006"} { // order events
				if err := database.Migrate(ctx, db, "down", io.Discard); err != nil {
					t.Fatalf("down %s: %v", m, err)
				}
			}
			if err := database.Migrate(ctx, db, "down", io.Discard); err != nil { // 00005, the waitlist: nobody waits
				t.Fatalf("down 00005: %v", err)
			}
			if err := database.Migrate(ctx, db, "down", io.Discard); err == nil {
				t.Fatal("down with two buyers' orders under one key succeeded; want it refused")
			}
			if n := orders(); n != 3 {
				t.Fatalf("%d orders after a refused down; want 3", n)
			}
			if err := db.Exec("DELETE FROM orders WHERE user_id = 'carol'").Error; err != nil {
				t.Fatal(err)
			}
			if err := database.Migrate(ctx, db, "down", io.Discard); err != nil {
				t.Fatalf("down: %v", err)
			}
			if n := orders(); n != 2 {
				t.Fatalf("%d orders after down; want 2", n)
			}
			if err := db.Exec("INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at) VALUES (?, 'dave', 1, 'k1', ?)", sku.ID, now).Error; err == nil {
				t.Error("after down the schema took a second order under key k1; want keys unique across buyers again")
			}
			if err := database.Migrate(ctx, db, "up", io.Discard); err != nil {
				t.Fatalf("up again: %v", err)
			}
			if n := orders(); n != 2 {
				t.Fatalf("%d orders after up again; want 2", n)
			}
			if err := buy("erin", "k1"); err != nil {
				t.Errorf("erin buys with alice's key after up again: %v; want a new order", err)
			}
			if err := buy("alice", "k1"); err != nil {
				t.Errorf("alice replays k1 after up again: %v; want her order", err)
			}
		})
	}
}
