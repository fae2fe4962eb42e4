package repository

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/service"
)

// confirmedDB creates the database seckill on rig's primary, migrated,
// opens it through rig's mover with at most conns connections, and
// returns it with the replicas confirming its writes (mysql.min_replicas
// 1, waiting up to timeout).
func confirmedDB(t testing.TB, rig *replicaRig, conns int, timeout time.Duration) (*gorm.DB, *Replicas) {
	t.Helper()
	ctx := context.Background()
	if err := rig.set.Primary.Exec(ctx, "CREATE DATABASE seckill"); err != nil {
		t.Fatal(err)
	}
	db, err := database.OpenMySQL("root@tcp("+rig.mover.Addr+")/seckill", database.Options{MaxOpenConns: conns, MaxIdleConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(db) })
	if err := database.Migrate(ctx, db, "up", io.Discard); err != nil {
		t.Fatal(err)
	}
	r := NewReplicas(ReplicasConfig{Nodes: []ReplicaConfig{openReplicaAt(t, rig.set.Replicas[0].Addr)}, Min: 1,
		Timeout: timeout, Primary: rig.primary, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { r.Close() })
	return db, r
}

// TestMySQL_EveryAcknowledgedWriteWaitsForTheReplicas (issue 46, 1): with
// the only replica stalled, a payment, a cancel, a restock, a sweep, a SKU
// created and one edited each commit on the primary but are answered
// ErrOutcomeUnknown, never success; once the replica resumes, the same
// call again answers what the first did (paid, cancelled, the stock),
// idempotently.
func TestMySQL_EveryAcknowledgedWriteWaitsForTheReplicas(t *testing.T) {
	rig := newReplicaRig(t, 1)
	ctx := context.Background()
	db, r := confirmedDB(t, rig, 4, 300*time.Millisecond)
	s := NewMySQL(db, WithReplicas(r))

	now := time.Now().UTC().Truncate(time.Microsecond)
	sku, err := s.CreateSKU(ctx, service.SKU{Name: "w", TotalStock: 10, Stock: 10, PerUserLimit: 5, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	b := service.Batch{SKUID: sku.ID, Now: now, PaymentTimeout: time.Hour}
	for _, u := range []string{"payer", "canceller", "expirer"} {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: sku.ID, UserID: u, Quantity: 1})
	}
	res, err := s.CommitBatch(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	paying, cancelling, expiring := res.Outcomes[0].Placed.Order.ID, res.Outcomes[1].Placed.Order.ID, res.Outcomes[2].Placed.Order.ID
	if err := r.Confirm(ctx, res.Commit); err != nil {
		t.Fatalf("the orders' commit, replica following: %v", err)
	}

	if err := rig.set.Replicas[0].StopIO(ctx); err != nil {
		t.Fatal(err)
	}
	limit := int64(2)
	writes := []struct {
		name  string
		write func() error
	}{
		{"pay", func() error { _, err := s.PayOrder(ctx, paying, time.Now().UTC()); return err }},
		{"cancel", func() error { _, err := s.CancelOrder(ctx, cancelling, "canceller", time.Now().UTC()); return err }},
		{"restock", func() error { _, _, err := s.SetStock(ctx, sku.ID, 50); return err }},
		{"expire", func() error { // the sweeper's: the waiters it gives units hear of it
			_, err := s.ExpireDue(ctx, service.ExpiryRun{Fence: 1, Now: now.Add(2 * time.Hour), Limit: 10})
			return err
		}},
		{"edit", func() error {
			_, err := s.UpdateSKU(ctx, sku.ID, service.SKUChange{PerUserLimit: &limit}, time.Now().UTC())
			return err
		}},
		{"create", func() error {
			_, err := s.CreateSKU(ctx, service.SKU{Name: "x", TotalStock: 1, Stock: 1, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			return err
		}},
	}
	for _, w := range writes {
		if err := w.write(); !errors.Is(err, service.ErrOutcomeUnknown) {
			t.Errorf("%s with the replica stalled = %v; want ErrOutcomeUnknown", w.name, err)
		}
	}
	if err := rig.set.Replicas[0].StartIO(ctx); err != nil {
		t.Fatal(err)
	}
	// The same calls again, answered once the replica has caught up.
	for _, w := range writes[:5] {
		var err error
		for range 40 {
			if err = w.write(); !errors.Is(err, service.ErrOutcomeUnknown) {
				break
			}
		}
		if err != nil {
			t.Errorf("%s again, the replica resumed = %v; want success", w.name, err)
		}
	}
	if o, err := s.Order(ctx, paying); err != nil || o.Status != service.OrderPaid {
		t.Errorf("paid order = %+v, %v", o, err)
	}
	if o, err := s.Order(ctx, cancelling); err != nil || o.Status != service.OrderCancelled {
		t.Errorf("cancelled order = %+v, %v", o, err)
	}
	if o, err := s.Order(ctx, expiring); err != nil || o.Status != service.OrderExpired {
		t.Errorf("expired order = %+v, %v", o, err)
	}
	if got, err := s.SKU(ctx, sku.ID); err != nil || got.Stock != 50 || got.PerUserLimit != 2 {
		t.Errorf("sku after restock and edit = %+v, %v; want stock 50, limit 2", got, err)
	}
}
