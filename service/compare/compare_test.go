package compare_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/compare"
)

// TestDesigns_NeverOversell runs every comparison design with the
// production limits (config.Default) on a real database and Redis: 330
// buyers (every tenth twice) for 100 units. Under contention a design may
// give up (503, uncharged); what it answers created is exactly what sold.
func TestDesigns_NeverOversell(t *testing.T) {
	t.Parallel()
	for _, d := range compare.Designs {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testenv.DB(t, testenv.Database(t))
			store := repository.New(db)
			rdb, prefix := testenv.Redis(t)
			cfg := config.Default()
			cfg.Lock.Prefix = prefix
			o, err := compare.New(d, store, app.NewLocker(lock.New(rdb, app.LockOptions(cfg)...)), compare.Config{
				RequestTimeout: cfg.Order.RequestTimeout,
				LockWait:       cfg.Lock.Wait,
				MaxRetries:     cfg.Order.MaxRetries,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			sku, err := store.CreateSKU(context.Background(), service.SKU{Name: "c", TotalStock: 100, Stock: 100, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu      sync.Mutex
				results = map[string]int{}
				wg      sync.WaitGroup
				start   = make(chan struct{})
			)
			for i := range 330 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					p, err := o.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", i%300), Quantity: 1})
					mu.Lock()
					results[service.ResultOf(err, p.Created)]++
					mu.Unlock()
				}()
			}
			close(start)
			wg.Wait()
			sold := testenv.CheckInvariants(t, db, sku.ID)
			if int64(results["created"]) != sold {
				t.Errorf("%d buyers told created; sold = %d (results %v)", results["created"], sold, results)
			}
			if got := results["created"] + results["sold_out"] + results["limit_exceeded"] + results["unavailable"]; got != 330 {
				t.Errorf("%d of 330 answers from the contract: %v", got, results)
			}
			t.Logf("%s: %v", d, results)
		})
	}
}

func TestNew_RefusesAnUnknownDesign(t *testing.T) {
	if _, err := compare.New("locked", nil, nil, compare.Config{}, nil); err == nil {
		t.Error(`New("locked") = nil error; want one: production is service.Orders`)
	}
}
