package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// heldRead holds the first SKU read made after arm until release is
// closed, announcing it on entered.
type heldRead struct {
	service.OrderReader
	armed            atomic.Bool
	entered, release chan struct{}
}

func (h *heldRead) SKU(ctx context.Context, id int64) (service.SKU, error) {
	if h.armed.CompareAndSwap(true, false) {
		close(h.entered)
		<-h.release
	}
	return h.OrderReader.SKU(ctx, id)
}

// TestPlace_StaleSoldOutNeverAnswers: a SKU sells out on B, B sits idle
// past sold_out.recheck, A restocks it, then a burst of buyers reaches B
// while B re-reads the row. Every buyer must get an order: a mark known
// to be stale must not answer sold_out to those who come during the
// re-read. The re-read is held until every other buyer either answered
// or waits for it, so the burst surely meets it.
func TestPlace_StaleSoldOutNeverAnswers(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:stale:") + ":"
	held := &heldRead{entered: make(chan struct{}), release: make(chan struct{})}
	a := newRig(t, dsn, rigOptions{Prefix: prefix})
	b := newRig(t, dsn, rigOptions{Prefix: prefix, Reads: func(s service.OrderReader) service.OrderReader { held.OrderReader = s; return held }})
	ctx := context.Background()
	sku := wiringtest.CreateSKU(t, a.Store, 1, 1)
	if _, err := b.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "first", Quantity: 1}); err != nil {
		t.Fatalf("Place on B = %v; want an order", err)
	}
	if _, err := b.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "late", Quantity: 1}); !errors.Is(err, service.ErrSoldOut) {
		t.Fatalf("Place on B after the sell-out = %v; want ErrSoldOut", err)
	}
	service.AgeSoldOutMark(b.SKUs, sku.ID, config.Default().SoldOut.Recheck) // B idle past recheck
	const stock = 20
	if _, err := a.Catalog.SetStock(ctx, sku.ID, stock); err != nil {
		t.Fatalf("restock on A = %v", err)
	}

	held.armed.Store(true)
	var (
		wg       sync.WaitGroup
		answered atomic.Int32
		mu       sync.Mutex
		results  = map[string]int{}
	)
	buy := func(user string) {
		defer wg.Done()
		p, err := b.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: user, Quantity: 1})
		mu.Lock()
		results[service.ResultOf(err, p.Created)]++
		mu.Unlock()
		answered.Add(1)
	}
	wg.Add(1)
	u0 := make(chan string, 1)
	go func() { buy("u-0"); u0 <- "an answer" }()
	wiringtest.Await(t, held.entered, u0, "u-0's re-read of the SKU") // u-0 started the re-read
	for i := 1; i < stock; i++ {
		wg.Add(1)
		go buy(fmt.Sprintf("u-%d", i))
	}
	deadline := time.Now().Add(time.Minute)
	// Every other buyer answered, or every buyer (u-0 included) waits.
	for n := int(answered.Load()); n < stock-1 && n+service.RowReadWaiters(b.SKUs, sku.ID) < stock; n = int(answered.Load()) {
		if time.Now().After(deadline) {
			t.Fatalf("buyers neither answered nor waiting for the re-read after a minute")
		}
		time.Sleep(time.Millisecond) // polling counters, bounded above
	}
	close(held.release)
	wg.Wait()
	if results["created"] != stock {
		t.Errorf("burst of %d buyers on B after the restock of %d units: %v; want %d created", stock, stock, results, stock)
	}
	if sold := testenv.CheckInvariants(t, a.DB, sku.ID); sold != stock+1 {
		t.Errorf("sold = %d; want %d", sold, stock+1)
	}
}
