package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// TestWaitlist_AUnitReturnedThroughOneInstanceGoesToTheEarliestWaiterOfAnother:
// two instances on one database; buyers ask to wait through either; a
// cancel through B gives its unit to the earliest waiter, placed through
// A, and a restock through A the next, placed through B (docs/design.md,
// invariant 20). Without "wait" a buyer is still refused sold out.
func TestWaitlist_AUnitReturnedThroughOneInstanceGoesToTheEarliestWaiterOfAnother(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:waitlist:") + ":"
	a := newRig(t, dsn, rigOptions{Prefix: prefix})
	b := newRig(t, dsn, rigOptions{Prefix: prefix})
	ctx := context.Background()
	sku := wiringtest.CreateSKU(t, a.Store, 1, 1)
	place := func(in *rig, user string, wait bool) (service.Placed, error) {
		return in.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: user, Quantity: 1, Wait: wait})
	}
	bought, err := place(a, "x", false)
	if err != nil || bought.Order.Status != service.OrderPending {
		t.Fatalf("Place(x) = %+v, %v; want a pending order", bought, err)
	}
	var ws []service.Order
	for i, in := range []*rig{a, b, a} { // w0 through A, w1 through B, w2 through A
		user := []string{"w0", "w1", "w2"}[i]
		p, err := place(in, user, true)
		if err != nil || !p.Created || p.Order.Status != service.OrderWaiting || p.Position != int64(i) {
			t.Fatalf("Place(%s, wait) = %+v, %v; want a new waiting order at position %d", user, p, err, i)
		}
		ws = append(ws, p.Order)
	}
	if _, err := place(b, "y", false); !errors.Is(err, service.ErrSoldOut) {
		t.Errorf("Place(y) without wait = %v; want ErrSoldOut", err)
	}

	bLife := service.NewLifecycle(b.Store, b.SKUs, testenv.Logger(), nil)
	if _, err := bLife.Cancel(ctx, bought.Order.ID, "x"); err != nil {
		t.Fatal(err)
	}
	want := []service.OrderStatus{service.OrderPending, service.OrderWaiting, service.OrderWaiting}
	check := func(step string) {
		t.Helper()
		for i, w := range ws {
			o, err := a.Orders.Order(ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != want[i] || (o.Status == service.OrderPending) != (o.AllocatedAt != nil) {
				t.Errorf("after %s, w%d's order = %s (allocated at %v); want %s", step, i, o.Status, o.AllocatedAt, want[i])
			}
		}
		testenv.CheckInvariants(t, a.DB, sku.ID)
	}
	check("a cancel through B")

	if _, err := a.Catalog.SetStock(ctx, sku.ID, 1); err != nil {
		t.Fatal(err)
	}
	want[1] = service.OrderPending
	check("a restock through A")
}
