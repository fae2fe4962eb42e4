//go:build repro_i18

// These tests reproduce issue 18's false sold-out after a paused instance
// resumes. They fail on the sold-out marks of service/soldout.go as of
// 61c512c and are kept out of the default suite until the rewrite of the
// marks (the DB re-check) lands: go test -tags repro_i18 ./service -run Paused
package service_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

// pausedAfterCommit lets the first CommitBatch commit, then holds its
// answer until release is closed: the instance paused (SIGSTOP) between
// the commit that sold the last unit and publishing the sold-out mark.
type pausedAfterCommit struct {
	service.Store
	committed, release chan struct{}
	first              bool
}

func (p *pausedAfterCommit) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	res, err := p.Store.CommitBatch(ctx, b)
	if !p.first { // one worker per SKU: no two calls at once
		p.first = true
		close(p.committed)
		<-p.release
	}
	return res, err
}

// TestPlace_PausedInstanceDoesNotPublishAStaleSoldOut: instance A sells
// the last unit and pauses before publishing "sold out at v"; a restock
// through B (version v+1) returns; A resumes. A's mark is older than the
// restock, so neither A nor an instance C that reads the shared mark may
// answer sold_out while the restocked units are there. With the shared
// mark lost meanwhile (Redis restarted empty), A's stale "+v" lands in
// Redis and C adopts it: issue 18's "another instance answered sold_out
// while units remained".
//
// The test compresses the pause: A resumes right after the restock, so a
// history check with the 500ms bound would still accept A's answer. The
// property asserted is the one that holds for a pause of any length (a
// real one outlives the 3s lease): a mark older than the restock's version
// is never trusted. The fix ties a mark to the database state: a refused
// shared write (a newer mark exists) must not be adopted locally, and a
// mark read from Redis is re-checked against the SKU's version in the
// database before it refuses anyone past the bound.
func TestPlace_PausedInstanceDoesNotPublishAStaleSoldOut(t *testing.T) {
	for _, lost := range []bool{false, true} {
		name := "shared mark kept"
		if lost {
			name = "shared mark lost while A was paused"
		}
		t.Run(name, func(t *testing.T) {
			dsn := testenv.Database(t)
			prefix := testenv.Name("test:paused:") + ":"
			pause := &pausedAfterCommit{committed: make(chan struct{}), release: make(chan struct{})}
			prod := func(c *service.OrdersConfig) { c.SoldOutTTL = 500 * time.Millisecond } // sold_out.local_ttl
			a := newRig(t, dsn, rigOptions{prefix: prefix, cfg: prod, store: func(s service.Store) service.Store { pause.Store = s; return pause }})
			b := newRig(t, dsn, rigOptions{prefix: prefix, cfg: prod})
			c := newRig(t, dsn, rigOptions{prefix: prefix, cfg: prod})
			sku := createSKU(t, b.store, 1, 1)
			ctx := context.Background()

			sold := make(chan error, 1)
			go func() {
				_, err := a.orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "last", Quantity: 1})
				sold <- err
			}()
			<-pause.committed
			if _, err := service.NewCatalog(b.store, b.orders, testenv.Logger()).SetStock(ctx, sku.ID, 5); err != nil {
				t.Fatal(err)
			}
			if lost {
				rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
				defer rdb.Close()
				// Only this test's own keys: the shared Redis is never flushed.
				iter := rdb.Scan(ctx, 0, prefix+"soldout:*", 100).Iterator()
				lost := 0
				for iter.Next(ctx) {
					if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
						t.Fatal(err)
					}
					lost++
				}
				if err := iter.Err(); err != nil || lost == 0 {
					t.Fatalf("losing the shared mark: %d keys, %v", lost, err)
				}
			}
			close(pause.release)
			if err := <-sold; err != nil {
				t.Fatalf("Place(last unit) = %v; want sold", err)
			}
			// The restock returned before A resumed: 5 units are there.
			for i, o := range []*service.Orders{a.orders, c.orders} {
				_, err := o.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "after-" + strconv.Itoa(i), Quantity: 1})
				if errors.Is(err, service.ErrSoldOut) {
					t.Errorf("Place on instance %c after the restock = sold_out; want a sale (5 units in stock)", "AC"[i])
				} else if err != nil {
					t.Fatalf("Place on instance %c = %v", "AC"[i], err)
				}
			}
			checkInvariants(t, b.db, sku.ID)
		})
	}
}
