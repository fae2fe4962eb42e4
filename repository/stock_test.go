package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

func setup(t *testing.T, stock, limit int64) (*gorm.DB, *repository.MySQL, service.SKU) {
	return setupB(t, stock, limit)
}

func setupB(t testing.TB, stock, limit int64) (*gorm.DB, *repository.MySQL, service.SKU) {
	t.Helper()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db)
	now := time.Now().UTC()
	sku, err := s.CreateSKU(context.Background(), service.SKU{Name: "t", TotalStock: stock, Stock: stock, PerUserLimit: limit, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return db, s, sku
}

// commitIn commits b alone (CommitBatch) or as a round of one
// (CommitRound).
func commitIn(ctx context.Context, s committer, b service.Batch, round bool) (service.BatchResult, error) {
	if !round {
		return s.CommitBatch(ctx, b)
	}
	res, err := s.CommitRound(ctx, []service.Batch{b})
	if err != nil {
		return service.BatchResult{}, err
	}
	return res[0].BatchResult, res[0].Err
}

func batch(skuID, fence int64, users ...string) service.Batch {
	b := service.Batch{SKUID: skuID, Fence: fence, Now: time.Now().UTC()}
	for _, u := range users {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: skuID, UserID: u, Quantity: 1})
	}
	return b
}

func TestCommitBatch_OneTransactionPerBatch(t *testing.T) {
	t.Parallel()
	db, s, sku := setup(t, 3, 1)
	res, err := s.CommitBatch(context.Background(), batch(sku.ID, 0, "a", "b", "a", "c", "d"))
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, nil, service.ErrLimitExceeded, nil, service.ErrSoldOut}
	for i, out := range res.Outcomes {
		if !errors.Is(out.Err, want[i]) || (want[i] == nil) != (out.Err == nil) {
			t.Errorf("request %d = %v; want %v", i, out.Err, want[i])
		}
		if out.Err == nil && out.Placed.Order.ID == 0 {
			t.Errorf("request %d: order has no id", i)
		}
	}
	if res.SKU.Stock != 0 {
		t.Errorf("Stock = %d; want 0", res.SKU.Stock)
	}
	got, _ := s.SKU(context.Background(), sku.ID)
	if got.Sold != 3 || got.Stock != 0 || got.Version != sku.Version+1 {
		t.Errorf("after one batch: sold %d stock %d version %d; want 3, 0, %d", got.Sold, got.Stock, got.Version, sku.Version+1)
	}
	var orders int64
	db.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ?", sku.ID).Scan(&orders)
	if orders != 3 {
		t.Errorf("orders = %d; want 3", orders)
	}
}

func TestCommitBatch_StaleFenceIsRefused(t *testing.T) {
	t.Parallel()
	_, s, sku := setup(t, 10, 1)
	ctx := context.Background()
	if _, err := s.CommitBatch(ctx, batch(sku.ID, 100, "new-holder")); err != nil {
		t.Fatalf("fence 100: %v", err)
	}
	// A holder whose lease expired still carries the older token 99.
	_, err := s.CommitBatch(ctx, batch(sku.ID, 99, "stale-holder"))
	if !errors.Is(err, service.ErrStaleFence) {
		t.Errorf("CommitBatch(fence 99 after 100) = %v; want ErrStaleFence", err)
	}
	got, _ := s.SKU(ctx, sku.ID)
	if got.Sold != 1 || got.Fence != 100 {
		t.Errorf("sold %d fence %d; want 1, 100 (the stale write must change nothing)", got.Sold, got.Fence)
	}
}

func TestCommitBatch_VersionMovedIsAConflict(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			if be.name == "sqlite" {
				// database.OpenSQLite gives the store one connection: no
				// writer can move the version between a batch's read and
				// its UPDATE, so there is no conflict to stage.
				t.Skip("SQLite runs one transaction at a time")
			}
			t.Parallel()
			testVersionMovedIsAConflict(t)
		})
	}
}

func testVersionMovedIsAConflict(t *testing.T) {
	db, s, sku := setup(t, 10, 1)
	ctx := context.Background()
	// Another writer bumps the version and holds its row lock: the batch
	// reads the old version (a snapshot read does not wait), then its
	// conditional UPDATE waits for the lock and, once the writer commits,
	// finds the version moved.
	other, err := testenv.DB(t, dsnOf(t, db)).DB()
	if err != nil {
		t.Fatal(err)
	}
	writer, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Exec("UPDATE skus SET version = version + 1 WHERE id = ?", sku.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.CommitBatch(ctx, batch(sku.ID, 0, "a"))
		done <- err
	}()
	waitForLockWait(t, other, done)
	if err := writer.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, service.ErrConflict) {
		t.Fatalf("CommitBatch with a moved version = %v; want ErrConflict", err)
	}
	got, _ := s.SKU(ctx, sku.ID)
	if got.Sold != 0 {
		t.Errorf("sold = %d after a conflict; want 0", got.Sold)
	}
	// The retry re-reads and succeeds.
	if _, err := s.CommitBatch(ctx, batch(sku.ID, 0, "a")); err != nil {
		t.Errorf("retry: %v", err)
	}
}

// waitForLockWait polls until the batch's conditional UPDATE is running
// (it can only be waiting for the writer's row lock): its reads are done.
func waitForLockWait(t *testing.T, db *sql.DB, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("CommitBatch returned %v without waiting for the row lock", err)
		default:
		}
		var n int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND info LIKE 'UPDATE skus SET stock%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch's UPDATE never started")
		}
		time.Sleep(5 * time.Millisecond) // polling a server-side state, bounded above
	}
}

func dsnOf(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var name string
	db.Raw("SELECT DATABASE()").Scan(&name)
	return testenv.MySQLDSN() + name
}

func TestSchema_RefusesWhatMustNeverBeWritten(t *testing.T) {
	t.Parallel()
	db, s, sku := setup(t, 1, 1)
	ctx := context.Background()
	if _, err := s.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Now: time.Now().UTC(), Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: "a", Quantity: 1, IdempotencyKey: "k"}}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		sql  string
		args []any
	}{
		{"negative stock", "UPDATE skus SET stock = -1, total_stock = sold - 1 WHERE id = ?", []any{sku.ID}},
		{"stock that does not add up", "UPDATE skus SET stock = stock + 1 WHERE id = ?", []any{sku.ID}},
		{"duplicate idempotency key", "INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at) VALUES (?, 'a', 1, 'k', NOW())", []any{sku.ID}},
		{"user over the per-user limit", "UPDATE user_purchases SET quantity = quantity + 1 WHERE sku_id = ?", []any{sku.ID}},
		{"order of a missing sku", "INSERT INTO orders (sku_id, user_id, quantity, created_at) VALUES (?, 'b', 1, NOW())", []any{sku.ID + 1000}},
		{"zero quantity", "INSERT INTO orders (sku_id, user_id, quantity, created_at) VALUES (?, 'b', 0, NOW())", []any{sku.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.Exec(tt.sql, tt.args...).Error; err == nil {
				t.Errorf("the database accepted %s", tt.name)
			}
		})
	}
}

func TestSetStock_KeepsTheBooksBalanced(t *testing.T) {
	t.Parallel()
	_, s, sku := setup(t, 2, 5)
	ctx := context.Background()
	if _, err := s.CommitBatch(ctx, batch(sku.ID, 0, "a", "b")); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.SetStock(ctx, sku.ID, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock != 7 || got.Sold != 2 || got.TotalStock != 9 {
		t.Errorf("after restock: stock %d sold %d total %d; want 7, 2, 9", got.Stock, got.Sold, got.TotalStock)
	}
	if _, _, err := s.SetStock(ctx, sku.ID+1000, 1); !errors.Is(err, service.ErrSKUNotFound) {
		t.Errorf("SetStock(missing) = %v; want ErrSKUNotFound", err)
	}
}

func TestOrdersBySKU_Pages(t *testing.T) {
	t.Parallel()
	_, s, sku := setup(t, 5, 1)
	ctx := context.Background()
	if _, err := s.CommitBatch(ctx, batch(sku.ID, 0, "a", "b", "c", "d", "e")); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var after int64
	for range 10 {
		page, err := s.OrdersBySKU(ctx, sku.ID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, o := range page {
			seen = append(seen, o.UserID)
		}
		after = page[len(page)-1].ID
	}
	if len(seen) != 5 {
		t.Errorf("paged through %v; want 5 orders", seen)
	}
}

func TestCommitBatch_SharedBatchesOfManySKUs(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			testSharedBatchesOfManySKUs(t, db, s)
		})
	}
}

// testSharedBatchesOfManySKUs commits rounds of batches of many SKUs (on
// MySQL each round is one transaction), one SKU stale-fenced: only its
// batches fail.
func testSharedBatchesOfManySKUs(t *testing.T, db *gorm.DB, s store) {
	ctx := context.Background()
	const skus, rounds = 20, 5
	ids := make([]int64, skus)
	for i := range ids {
		now := time.Now().UTC()
		sku, err := s.CreateSKU(ctx, service.SKU{Name: "many", TotalStock: 10, Stock: 10, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = sku.ID
		if i == 0 { // SKU 0 carries a newer fence than its batches: they must fail alone
			if _, err := s.CommitBatch(ctx, batch(sku.ID, 1000, "fenced")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r := range rounds {
		bs := make([]service.Batch, skus)
		for i, id := range ids {
			bs[i] = batch(id, int64(i*rounds+r+1), fmt.Sprintf("u%d-a", r), fmt.Sprintf("u%d-b", r))
		}
		answers, err := s.CommitRound(ctx, bs)
		if err != nil || len(answers) != skus {
			t.Fatalf("round %d = %d answers, %v; want %d answers", r, len(answers), err, skus)
		}
		for i, a := range answers {
			switch {
			case i == 0 && !errors.Is(a.Err, service.ErrStaleFence):
				t.Errorf("stale-fenced sku: err = %v; want ErrStaleFence", a.Err)
			case i != 0 && a.Err != nil:
				t.Errorf("sku %d round %d: %v", ids[i], r, a.Err)
			case i != 0 && (len(a.Outcomes) != 2 || a.Outcomes[0].Err != nil || a.Outcomes[1].Err != nil || a.Outcomes[0].Placed.Order.ID == 0):
				t.Errorf("sku %d round %d: outcomes %+v", ids[i], r, a.Outcomes)
			}
		}
	}
	for i, id := range ids {
		want := int64(2 * rounds)
		if i == 0 {
			want = 1
		}
		var sold, orders int64
		db.Raw("SELECT sold FROM skus WHERE id = ?", id).Scan(&sold)
		db.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ?", id).Scan(&orders)
		if sold != want || orders != want {
			t.Errorf("sku %d: sold %d, %d orders; want %d", id, sold, orders, want)
		}
	}
}

// A batch that brings the SKU as the previous batch left it (a lock
// holder's next batch) is decided on that row, without reading it; when
// the row changed meanwhile, the batch reads it and is decided again.
func TestCommitBatch_KnownRowSparesTheReadsUntilTheRowChanges(t *testing.T) {
	t.Parallel()
	db, s, sku := setup(t, 10, 1)
	ctx := context.Background()
	first, err := s.CommitBatch(ctx, batch(sku.ID, 0, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	// The name is the one thing a write does not check: a batch decided
	// on the known row answers with this name, one decided on what it
	// read with the database's.
	known := first.SKU
	known.Name = "as the worker knows it"
	b := batch(sku.ID, 0, "c")
	b.Known = &known
	second, err := s.CommitBatch(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if first.ReadsSkipped || !second.ReadsSkipped {
		t.Errorf("ReadsSkipped = %v, then %v; want false (no known row), then true", first.ReadsSkipped, second.ReadsSkipped)
	}
	if second.SKU.Name != known.Name || second.SKU.Stock != 7 || second.SKU.Version != first.SKU.Version+1 {
		t.Errorf("after a batch on the known row: %+v; want it decided on the known row (name %q), stock 7, version %d", second.SKU, known.Name, first.SKU.Version+1)
	}

	if _, _, err := s.SetStock(ctx, sku.ID, 20); err != nil { // elsewhere: an admin's restock
		t.Fatal(err)
	}
	b = batch(sku.ID, 0, "d", "a")
	b.Known = &second.SKU
	third, err := s.CommitBatch(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if third.ReadsSkipped {
		t.Error("ReadsSkipped after a restock elsewhere; want the row read again")
	}
	if third.SKU.Name != sku.Name || third.SKU.Stock != 19 || third.SKU.TotalStock != 23 {
		t.Errorf("after a restock elsewhere: %+v; want the row read again (name %q), stock 19 of 23", third.SKU, sku.Name)
	}
	if out := third.Outcomes; out[0].Err != nil || !errors.Is(out[1].Err, service.ErrLimitExceeded) {
		t.Errorf("outcomes %+v; want d's order and a's limit exceeded", out)
	}
	assertBooks(t, db, sku.ID, 23, 4, 1)
}

// A SKU's times are written as the column keeps them (microseconds), so
// the SKU CreateSKU returns is the SKU every instance reads back: its
// created_at in microseconds is its identity (service.SKURef), and servers
// disagree on the nanoseconds below (MySQL 8 rounds, MariaDB truncates).
func TestCreateSKU_WritesWhatIsReadBack(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db)
	ctx := context.Background()
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC) // .1234568 when rounded
	starts, ends := at.Add(time.Hour), at.Add(2*time.Hour)
	created, err := s.CreateSKU(ctx, service.SKU{Name: "t", TotalStock: 1, Stock: 1, PerUserLimit: 1,
		StartsAt: &starts, EndsAt: &ends, CreatedAt: at, UpdatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.SKU(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !created.CreatedAt.Equal(read.CreatedAt) || !created.UpdatedAt.Equal(read.UpdatedAt) ||
		!created.StartsAt.Equal(*read.StartsAt) || !created.EndsAt.Equal(*read.EndsAt) {
		t.Errorf("CreateSKU returned times %v %v %v %v; read back %v %v %v %v", created.CreatedAt, created.UpdatedAt,
			*created.StartsAt, *created.EndsAt, read.CreatedAt, read.UpdatedAt, *read.StartsAt, *read.EndsAt)
	}
	if service.RefOf(created) != service.RefOf(read) {
		t.Errorf("RefOf(created) = %v, RefOf(read back) = %v; want one identity", service.RefOf(created), service.RefOf(read))
	}
	var stored time.Time
	if err := db.Raw("SELECT created_at FROM skus WHERE id = ?", created.ID).Row().Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := at.Truncate(time.Microsecond); !stored.Equal(want) {
		t.Errorf("created_at stored %v; want %v (the microseconds of the time given, not rounded)", stored, want)
	}
}

// confirmAll confirms every commit: the store's position tracking without
// replicas.
type confirmAll struct{}

func (confirmAll) Confirm(context.Context, service.Commit) error { return nil }

// With replicas asked for, each commit carries where it committed, and a
// known row is used only on the server that committed it: after a
// failover the promoted server's row may have the known version with
// other contents, so a batch whose known row names another server (or
// none) reads the row.
func TestCommitBatch_KnownRowOnlyOnItsServer(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db, repository.WithReplicas(confirmAll{}))
	now := time.Now().UTC()
	sku, err := s.CreateSKU(context.Background(), service.SKU{Name: "t", TotalStock: 10, Stock: 10, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := s.CommitBatch(ctx, batch(sku.ID, 0, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Commit.Server == 0 {
		t.Fatalf("Commit = %+v; want the server id read with the COMMIT", first.Commit)
	}
	for _, tc := range []struct {
		name   string
		on     int64
		reused bool
	}{
		{"another server", first.Commit.Server + 1, false},
		{"no server", 0, false},
		{"its server", first.Commit.Server, true},
	} {
		prev, err := s.SKU(ctx, sku.ID)
		if err != nil {
			t.Fatal(err)
		}
		b := batch(sku.ID, 0, "u-"+strings.ReplaceAll(tc.name, " ", "-"))
		b.Known, b.KnownOn = &prev, tc.on
		res, err := s.CommitBatch(ctx, b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.ReadsSkipped != tc.reused {
			t.Errorf("%s: ReadsSkipped = %v; want %v", tc.name, res.ReadsSkipped, tc.reused)
		}
	}
	assertBooks(t, db, sku.ID, 10, 5, 1)
}
