// These tests reproduce a false sold-out after a paused instance
// resumes; they failed on the sold-out marks of service/soldout.go up to
// the change that dates a mark from its commit and checks a shared mark
// against the database before trusting it.
package service_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// pausedAfterCommit lets the first CommitBatch commit, then holds its
// answer until release is closed: the instance paused (SIGSTOP) between
// the commit that sold the last unit and publishing the sold-out mark.
type pausedAfterCommit struct {
	engine.Committer
	committed, release chan struct{}
	first              bool
	resumed            sync.Once
}

// resume lets the paused commit answer; once, from the test or its cleanup.
func (p *pausedAfterCommit) resume() { p.resumed.Do(func() { close(p.release) }) }

func (p *pausedAfterCommit) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, p.CommitBatch)
}

func (p *pausedAfterCommit) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	res, err := p.Committer.CommitBatch(ctx, b)
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
// Redis and C adopts it: "another instance answered sold_out
// while units remained".
//
// The test compresses the pause: A resumes right after the restock. With
// the shared mark kept, A reads back the restock's newer mark and sells at
// once. With it lost, nothing but the database knows of the restock: A
// may refuse for up to sold_out.recheck after its commit began (the
// documented bound, which a history check accepts), then sells; C, which
// reads A's stale mark from Redis, checks the database before trusting it
// and never refuses.
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
			prod := func(c *service.DirectoryConfig) { c.SoldOutTTL = 500 * time.Millisecond } // sold_out.local_ttl
			a := newRig(t, dsn, rigOptions{Prefix: prefix, SKUs: prod, Commits: func(s engine.Committer) engine.Committer { pause.Committer = s; return pause }})
			b := newRig(t, dsn, rigOptions{Prefix: prefix, SKUs: prod})
			// C looks at the shared mark on every request, so that it reads
			// A's late mark whenever Redis holds it.
			eager := func(c *service.DirectoryConfig) { c.SoldOutTTL = time.Nanosecond }
			c := newRig(t, dsn, rigOptions{Prefix: prefix, SKUs: eager})
			t.Cleanup(pause.resume) // before the rigs' shutdown: a failed test leaves no worker paused
			sku := wiringtest.CreateSKU(t, b.Store, 2, 1)
			ctx := context.Background()
			// C knows the SKU in stock from before the sell-out.
			if _, err := c.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "first", Quantity: 1}); err != nil {
				t.Fatalf("Place on instance C = %v; want a sale", err)
			}

			sold := make(chan error, 1)
			go func() {
				_, err := a.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "last", Quantity: 1})
				sold <- err
			}()
			wiringtest.Await(t, pause.committed, sold, "A's commit of the last unit")
			if _, err := service.NewCatalog(b.Store, b.Store, b.SKUs, testenv.Logger()).SetStock(ctx, sku.ID, 5); err != nil {
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
			pause.resume()
			if err := <-sold; err != nil {
				t.Fatalf("Place(last unit) = %v; want sold", err)
			}
			// The restock returned before A resumed: 5 units are there.
			if _, err := c.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "after-c", Quantity: 1}); err != nil {
				t.Errorf("Place on instance C after the restock = %v; want a sale (5 units in stock)", err)
			}
			deadline := time.Now().Add(time.Minute) // far above sold_out.recheck: a bound, not a measurement
			for i := 0; ; i++ {
				_, err := a.Orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "after-a-" + strconv.Itoa(i), Quantity: 1})
				if err == nil {
					if !lost && i > 0 {
						t.Errorf("A refused %d times with the restock's mark in Redis; want a sale at once", i)
					}
					break
				}
				if !errors.Is(err, service.ErrSoldOut) {
					t.Fatalf("Place on instance A = %v", err)
				}
				if time.Now().After(deadline) {
					t.Fatalf("A still answers sold_out a minute after the restock; want a sale within sold_out.recheck")
				}
				time.Sleep(20 * time.Millisecond) // polling observable state, bounded above
			}
			testenv.CheckInvariants(t, b.DB, sku.ID)
		})
	}
}
