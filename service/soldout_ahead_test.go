package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// TestPlace_ASoldOutMarkIsReadAgainAhead: past half of sold_out.recheck,
// a sold-out refusal starts the re-read of the SKU's row and answers
// without waiting for it; the read confirms the mark again before it
// expires, so the buyers of a SKU asked all the time never wait for a
// read (at 10,000 connections they all did, each second). The read is
// held until the refusal has answered. A recheck of an hour, the mark
// aged by half of it and a second, leaves no race with the clock.
func TestPlace_ASoldOutMarkIsReadAgainAhead(t *testing.T) {
	t.Parallel()
	const recheck = time.Hour
	held := &heldRead{entered: make(chan struct{}), release: make(chan struct{})}
	b := newRig(t, testenv.Database(t), rigOptions{
		Prefix: testenv.Name("test:ahead:") + ":",
		Reads:  func(s service.OrderReader) service.OrderReader { held.OrderReader = s; return held },
		SKUs:   func(c *service.DirectoryConfig) { c.SoldOutRecheck = recheck },
	})
	ctx := context.Background()
	sku := wiringtest.CreateSKU(t, b.Store, 1, 1)
	if _, err := b.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "first", Quantity: 1}); err != nil {
		t.Fatalf("Place = %v; want the only unit", err)
	}
	service.AgeSoldOutMark(b.SKUs, sku.ID, recheck/2+time.Second)
	asked := time.Now()
	held.armed.Store(true)
	answer := make(chan error, 1)
	go func() {
		_, err := b.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "late", Quantity: 1})
		answer <- err
	}()
	bound := time.NewTimer(time.Minute)
	defer bound.Stop()
	select {
	case err := <-answer:
		if !errors.Is(err, service.ErrSoldOut) {
			t.Fatalf("Place past half the recheck = %v; want ErrSoldOut", err)
		}
	case <-bound.C:
		t.Fatal("Place past half the recheck waited a minute for the re-read; want an answer from the mark")
	}
	var never chan error
	wiringtest.Await(t, held.entered, never, "the re-read started ahead by the refusal")
	done := service.RowRead(b.SKUs, sku.ID)
	if done == nil {
		t.Fatal("no re-read in flight while the store holds it")
	}
	close(held.release)
	select {
	case <-done:
	case <-bound.C:
		t.Fatal("the re-read did not end within a minute of its release")
	}
	if at := service.SoldOutConfirmed(b.SKUs, sku.ID); at.Before(asked) {
		t.Errorf("the mark was confirmed at %v, before the refusal at %v; want the re-read's start", at, asked)
	}
	if _, err := b.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "later", Quantity: 1}); !errors.Is(err, service.ErrSoldOut) {
		t.Errorf("Place after the re-read = %v; want ErrSoldOut", err)
	}
	testenv.CheckInvariants(t, b.DB, sku.ID)
}
