package repository

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/service"
)

// TestMySQL_EventsWaitForTheReplicas (issue 51; docs/design.md invariants
// 18 and 21): with events on and the only replica stalled, a payment
// commits on the primary, but the relay is handed no event of it
// (Unpublished answers ErrOutcomeUnknown): a failover to the replica
// would lose the change, and the stream would tell one that never
// happened there. Once the replica resumes, both events are handed over.
func TestMySQL_EventsWaitForTheReplicas(t *testing.T) {
	rig := newReplicaRig(t, 1)
	ctx := context.Background()
	db, r := confirmedDB(t, rig, 4, 300*time.Millisecond)
	s := NewMySQL(db, WithReplicas(r), WithEvents())

	now := time.Now().UTC().Truncate(time.Microsecond)
	sku, err := s.CreateSKU(ctx, service.SKU{Name: "e", TotalStock: 10, Stock: 10, PerUserLimit: 5, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Now: now, PaymentTimeout: time.Hour,
		Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: "payer", Quantity: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Confirm(ctx, res.Commit); err != nil {
		t.Fatalf("the order's commit, replica following: %v", err)
	}
	if evs, err := s.Unpublished(ctx, 100); err != nil || len(evs) != 1 || evs[0].Type != service.EventCreated {
		t.Fatalf("Unpublished, replica following = %+v, %v; want the order's created event", evs, err)
	}

	if err := rig.set.Replicas[0].StopIO(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PayOrder(ctx, res.Outcomes[0].Placed.Order.ID, time.Now().UTC()); !errors.Is(err, service.ErrOutcomeUnknown) {
		t.Fatalf("pay with the replica stalled = %v; want ErrOutcomeUnknown", err)
	}
	if evs, err := s.Unpublished(ctx, 100); !errors.Is(err, service.ErrOutcomeUnknown) {
		t.Errorf("Unpublished with the replica stalled = %+v, %v; want ErrOutcomeUnknown: the payment is on the primary only", evs, err)
	}
	if err := rig.set.Replicas[0].StartIO(ctx); err != nil {
		t.Fatal(err)
	}
	var evs []service.OrderEvent
	for range 40 { // each try waits at most the replicas' timeout
		if evs, err = s.Unpublished(ctx, 100); !errors.Is(err, service.ErrOutcomeUnknown) {
			break
		}
	}
	if err != nil || len(evs) != 2 || evs[1].Type != service.EventPaid {
		t.Errorf("Unpublished, the replica resumed = %+v, %v; want created then paid", evs, err)
	}
}
