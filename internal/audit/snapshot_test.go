package audit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/audit"
	"github.com/seckill/seckill/service"
)

// TestAudit_DuringSale: audits running while orders are placed and
// cancelled raise no false alarm: each reads one snapshot of the SKU, so
// no commit lands between its reads of the skus row and of the orders.
func TestAudit_DuringSale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db, s := open(t)
	const n = 200
	now := time.Now().UTC()
	sku, err := s.CreateSKU(ctx, service.SKU{Name: "live", TotalStock: n, Stock: n, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for i := range n {
			user := fmt.Sprintf("u-%d", i)
			res, err := s.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Now: time.Now().UTC(), PaymentTimeout: window,
				Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: user, Quantity: 1}}})
			if err == nil {
				err = res.Outcomes[0].Err
			}
			if err == nil && i%2 == 0 {
				_, err = s.CancelOrder(ctx, res.Outcomes[0].Placed.Order.ID, user, time.Now().UTC())
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	audits := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			r, err := audit.SKU(ctx, db, sku.ID)
			if err != nil || !r.OK() || r.Sold != n/2 || r.Cancelled.Orders != n/2 {
				t.Fatalf("after the sale: %+v, %v; want OK, %d sold, %d cancelled", r, err, n/2, n/2)
			}
			return
		default:
		}
		r, err := audit.SKU(ctx, db, sku.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("audit %d during the sale fails %+v (sold %d, live units %d)", audits, r.Failures, r.Sold, r.LiveUnits())
		}
		audits++
	}
}
