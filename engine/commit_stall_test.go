package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// A COMMIT whose reply never comes (the database goes silent without
// closing the connection) costs its buyer a 503 outcome_unknown within
// order.request_timeout, and shutdown finishes within its grace; the
// order is then found by its key, and the books balance.
func TestPlace_CommitWithoutReplyIsAnsweredInTime(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	proxied, proxy := testenv.ThroughMySQLProxy(t, dsn)
	r := newRig(t, proxied, rigOptions{})
	t.Cleanup(proxy.Cut) // before the rig's Shutdown: a stuck COMMIT must not hang the test
	sku := wiringtest.CreateSKU(t, r.Store, 5, 1)
	pc := config.Default() // production defaults, as newRig runs them

	committed := proxy.StallAtCommit()
	req := service.OrderRequest{SKUID: sku.ID, UserID: "alice", Quantity: 1, IdempotencyKey: "alice-1"}
	ctx, cancel := context.WithTimeout(context.Background(), pc.Order.RequestTimeout)
	defer cancel()
	type answer struct {
		placed service.Placed
		err    error
		late   error // the request's context when the answer came
	}
	answered := make(chan answer, 1)
	go func() {
		p, err := r.Orders.Place(ctx, req)
		answered <- answer{p, err, ctx.Err()}
	}()
	select {
	case <-committed:
	case a := <-answered:
		t.Fatalf("Place = %+v, %v before its COMMIT was sent", a.placed, a.err)
	}

	// Shutdown waits for the batch in flight: it must end within its grace.
	shut, cancelShut := context.WithTimeout(context.Background(), pc.HTTP.ShutdownTimeout)
	defer cancelShut()
	shutDone := make(chan error, 1)
	go func() { shutDone <- r.Seller.Shutdown(shut) }()

	var a answer
	select {
	case a = <-answered:
	case <-time.After(pc.Order.RequestTimeout + time.Second):
		t.Fatalf("no answer within order.request_timeout (%v) to a buyer whose COMMIT got no reply", pc.Order.RequestTimeout)
	}
	if a.late != nil {
		t.Errorf("Place answered after its request's context ended (%v)", a.late)
	}
	if !errors.Is(a.err, service.ErrOutcomeUnknown) {
		t.Errorf("Place = %+v, %v; want ErrOutcomeUnknown", a.placed, a.err)
	}
	select {
	case err := <-shutDone:
		if err != nil {
			t.Errorf("Shutdown = %v; want nil within %v", err, pc.HTTP.ShutdownTimeout)
		}
	case <-time.After(pc.HTTP.ShutdownTimeout + time.Second):
		t.Fatalf("Shutdown did not return within its grace (%v)", pc.HTTP.ShutdownTimeout)
	}

	// The COMMIT reached the server: the order exists, once, and a retry
	// with its key finds it.
	direct := testenv.DB(t, dsn)
	if sold := testenv.CheckInvariants(t, direct, sku.ID); sold != 1 {
		t.Errorf("sold %d; want 1 (the COMMIT reached the server)", sold)
	}
	got, err := repository.NewMySQL(direct).OrderByKey(context.Background(), req.UserID, req.IdempotencyKey)
	if err != nil || !got.Same(req) {
		t.Errorf("OrderByKey(%q) = %+v, %v; want alice's order", req.IdempotencyKey, got, err)
	}
}
