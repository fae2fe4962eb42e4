package service_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/procstat"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// countingStore counts the SKU reads of the order path.
type countingStore struct {
	service.OrderReader
	skuReads atomic.Int64
}

func (c *countingStore) SKU(ctx context.Context, id int64) (service.SKU, error) {
	c.skuReads.Add(1)
	return c.OrderReader.SKU(ctx, id)
}

// redisKeys returns the keys under prefix.
func redisKeys(t *testing.T, r *rig) []string {
	t.Helper()
	var keys []string
	iter := r.Redis.Scan(context.Background(), 0, r.Prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// rssBytes returns the process's resident set size, or 0 where /proc
// does not tell.
func rssBytes() uint64 {
	n, _ := procstat.RSS(procstat.Self)
	return uint64(n)
}

// heapBytes returns the live heap: what a full collection leaves.
func heapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitGoroutines waits until the process runs at most n goroutines.
func waitGoroutines(t *testing.T, n int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := runtime.NumGoroutine()
		if got <= n {
			return got
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines 30s after the burst; want at most %d (the baseline)\n%s", got, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling a counter, bounded above
	}
}

// dropIdleConns closes the idle connections of the rigs' pools.
func dropIdleConns(t *testing.T, rigs []*rig) {
	t.Helper()
	for _, r := range rigs {
		sqlDB, err := r.DB.DB()
		if err != nil {
			t.Fatal(err)
		}
		sqlDB.SetMaxIdleConns(0)
		sqlDB.SetMaxIdleConns(32)
	}
}

// inventedBurst sends n orders for ids that do not exist, spread over the
// instances, conc at a time, and fails on any answer but ErrSKUNotFound.
func inventedBurst(t *testing.T, rigs []*rig, first int64, n, conc int) {
	t.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	var wrong atomic.Int64
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				r := rigs[(int(i)+w)%len(rigs)]
				_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: first + i, UserID: "attacker", Quantity: 1})
				if !errors.Is(err, service.ErrSKUNotFound) && wrong.Add(1) <= 5 {
					t.Errorf("Place(invented sku %d) = %v; want ErrSKUNotFound", first+i, err)
				}
			}
		}()
	}
	wg.Wait()
}

// TestPlace_InventedSKUsCostNothingLasting is the invented-id attack: 20,000
// orders for SKU ids that do not exist, over three instances on one
// database and Redis. Not parallel: it measures the process.
func TestPlace_InventedSKUsCostNothingLasting(t *testing.T) {
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:orders:") + ":"
	rigs := make([]*rig, 3)
	for i := range rigs {
		rigs[i] = newRig(t, dsn, rigOptions{Prefix: prefix})
	}
	real := wiringtest.CreateSKU(t, rigs[0].Store, 10, 1)
	const base = int64(1) << 40 // far above any id the database hands out

	inventedBurst(t, rigs, base, 2000, 64) // warm up: what is allocated once is not per id
	dropIdleConns(t, rigs)                 // a pooled connection has a goroutine: not per id either
	goroutines, heap, rss := runtime.NumGoroutine(), heapBytes(), rssBytes()

	const n = 20_000
	inventedBurst(t, rigs, base+2000, n, 64)

	dropIdleConns(t, rigs)
	after := waitGoroutines(t, goroutines)
	heapAfter, rssAfter := heapBytes(), rssBytes()
	t.Logf("%d orders for invented ids over 3 instances: goroutines %d → %d; heap %.1f → %.1f MB; RSS %.1f → %.1f MB",
		n, goroutines, after, float64(heap)/(1<<20), float64(heapAfter)/(1<<20), float64(rss)/(1<<20), float64(rssAfter)/(1<<20))
	// What lasts is the live heap after a collection (RSS also holds what
	// the collector has not returned yet, and the race detector's shadow
	// memory: logged, not bounded). An invented id may leave its entry in
	// the bounded table of ids known not to exist (directory.go), nothing
	// more: no queue, goroutine or Redis key (below).
	const perID = 512 // bytes; an entry of that table is about 100
	if heapAfter > heap && heapAfter-heap > n*perID {
		t.Errorf("live heap grew by %.1f MB for %d invented ids; want at most %d bytes each", float64(heapAfter-heap)/(1<<20), n, perID)
	}
	for i, r := range rigs {
		if q := r.Seller.LiveQueues(); q != 0 {
			t.Errorf("instance %d runs %d SKU queues after orders for invented ids; want 0", i, q)
		}
	}
	if keys := redisKeys(t, rigs[0]); len(keys) != 0 {
		t.Errorf("%d Redis keys under the prefix after orders for invented ids; want 0: %v", len(keys), keys[:min(len(keys), 5)])
	}

	// The instances still sell what exists.
	if _, err := rigs[1].Orders.Place(context.Background(), service.OrderRequest{SKUID: real.ID, UserID: "buyer", Quantity: 1}); err != nil {
		t.Fatalf("Place(real sku) = %v; want an order", err)
	}
	if sold := testenv.CheckInvariants(t, rigs[0].DB, real.ID); sold != 1 {
		t.Errorf("sold = %d; want 1", sold)
	}
}

func TestPlace_OneInventedIDCostsOneRead(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	var counter *countingStore
	r := newRig(t, dsn, rigOptions{
		Reads: func(s service.OrderReader) service.OrderReader {
			counter = &countingStore{OrderReader: s}
			return counter
		},
		SKUs: func(c *service.DirectoryConfig) { c.UnknownSKUTTL = time.Hour }, // the test outlasts no negative entry
	})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: 1 << 40, UserID: "u", Quantity: 1}); !errors.Is(err, service.ErrSKUNotFound) {
				t.Errorf("Place(invented) = %v; want ErrSKUNotFound", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := counter.skuReads.Load(); n != 1 {
		t.Errorf("1000 orders for one invented id read the database %d times; want 1", n)
	}
	// A SKU created through this instance is sellable at once, not after
	// the negative entry's life.
	created, err := r.Catalog.Create(context.Background(), service.NewSKU{Name: "new", Stock: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: created.ID + 1, UserID: "u", Quantity: 1}); !errors.Is(err, service.ErrSKUNotFound) {
		t.Fatalf("Place(next id) = %v; want ErrSKUNotFound", err)
	}
	other, err := r.Catalog.Create(context.Background(), service.NewSKU{Name: "next", Stock: 1})
	if err != nil {
		t.Fatal(err)
	}
	if other.ID != created.ID+1 {
		t.Skipf("ids not consecutive (%d, %d): cannot test the negative entry's invalidation", created.ID, other.ID)
	}
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: other.ID, UserID: "u", Quantity: 1}); err != nil {
		t.Errorf("Place(sku created here after a 404 for its id) = %v; want an order", err)
	}
	testenv.CheckInvariants(t, r.DB, other.ID)
}

func TestPlace_LiveSKUQueuesAreBounded(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	var g *wiringtest.GatedStore
	r := newRig(t, dsn, rigOptions{
		Commits: func(s engine.Committer) engine.Committer { g = wiringtest.Gate(s); return g },
		Engine:  func(c *engine.Config) { c.MaxLiveSKUs = 1 },
	})
	a, b := wiringtest.CreateSKU(t, r.Store, 10, 1), wiringtest.CreateSKU(t, r.Store, 10, 1)
	first := make(chan error, 1)
	go func() {
		_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: a.ID, UserID: "a", Quantity: 1})
		first <- err
	}()
	wiringtest.Await(t, g.Entered, first, "sku a's first order in its commit") // sku a's queue is live
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: b.ID, UserID: "b", Quantity: 1}); !errors.Is(err, service.ErrTooManySKUs) {
		t.Errorf("Place(second sku with max_live_skus 1) = %v; want ErrTooManySKUs", err)
	}
	close(g.Release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if sold := testenv.CheckInvariants(t, r.DB, b.ID); sold != 0 {
		t.Errorf("sku b sold %d; want 0 (refused, uncharged)", sold)
	}
	if sold := testenv.CheckInvariants(t, r.DB, a.ID); sold != 1 {
		t.Errorf("sku a sold %d; want 1", sold)
	}
}

// soldOutBound is the documented bound on a stale sold-out (sold_out.local_ttl
// + sold_out.recheck); tests wait up to ten times it, polling.
var soldOutBound = config.Default().SoldOut.LocalTTL + config.Default().SoldOut.Recheck

// sellsWithin polls Place until it sells, failing after ten times the bound.
func sellsWithin(t *testing.T, o *service.Orders, skuID int64, user string) (tries int) {
	t.Helper()
	deadline := time.Now().Add(10 * soldOutBound)
	for {
		tries++
		_, err := o.Place(context.Background(), service.OrderRequest{SKUID: skuID, UserID: user, Quantity: 1})
		switch {
		case err == nil:
			return tries
		case !errors.Is(err, service.ErrSoldOut) && !errors.Is(err, service.ErrUnavailable):
			t.Fatalf("Place after the restock = %v; want an order", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %v %v after the restock; the documented bound is %v", err, 10*soldOutBound, soldOutBound)
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded above
	}
}

// TestPlace_RestockOnASeenByB: B sells a SKU out, A restocks it while the
// shared mark cannot say so; B sells again within the documented bound.
func TestPlace_RestockOnASeenByB(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault func(t *testing.T, srv *testenv.RedisServer, a *rig, skuID int64)
		after func(t *testing.T, srv *testenv.RedisServer, a *rig)
	}{
		{
			name: "shared mark expired before the restock",
			fault: func(t *testing.T, _ *testenv.RedisServer, a *rig, skuID int64) {
				if err := a.Redis.Del(context.Background(), a.Prefix+"soldout:{sku:"+strconv.FormatInt(skuID, 10)+"}").Err(); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:  "Redis down during the restock",
			fault: func(t *testing.T, srv *testenv.RedisServer, _ *rig, _ int64) { srv.Stop() },
			after: func(t *testing.T, _ *testenv.RedisServer, a *rig) {
				if n := a.obs.unpublished.Load(); n != 1 {
					t.Errorf("unpublished restocks counted %d; want 1", n)
				}
			},
		},
		{
			name:  "Redis down during the restock and back",
			fault: func(t *testing.T, srv *testenv.RedisServer, _ *rig, _ int64) { srv.Stop() },
			after: func(t *testing.T, srv *testenv.RedisServer, _ *rig) { srv.Start() },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := testenv.StartRedis(t)
			dsn := testenv.Database(t)
			prefix := testenv.Name("test:orders:") + ":"
			a := newRig(t, dsn, rigOptions{RedisAddr: srv.Addr, Prefix: prefix})
			b := newRig(t, dsn, rigOptions{RedisAddr: srv.Addr, Prefix: prefix})
			sku := wiringtest.CreateSKU(t, a.Store, 2, 1)
			for _, u := range []string{"b-1", "b-2"} {
				if _, err := b.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: u, Quantity: 1}); err != nil {
					t.Fatalf("Place on B = %v", err)
				}
			}
			if _, err := b.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "b-3", Quantity: 1}); !errors.Is(err, service.ErrSoldOut) {
				t.Fatalf("Place on B after the sell-out = %v; want ErrSoldOut", err)
			}
			tc.fault(t, srv, a, sku.ID)
			if _, err := a.Catalog.SetStock(context.Background(), sku.ID, 3); err != nil {
				t.Fatalf("restock on A = %v", err)
			}
			if tc.after != nil {
				tc.after(t, srv, a)
			}
			tries := sellsWithin(t, b.Orders, sku.ID, "b-4")
			t.Logf("B sold after %d tries", tries)
			if sold := testenv.CheckInvariants(t, a.DB, sku.ID); sold != 3 {
				t.Errorf("sold = %d; want 3", sold)
			}
		})
	}
}

// TestPlace_MarkOfAnEarlierSKUDoesNotBlock: a database recreated with the
// same ids finds the old database's sold-out mark in Redis (invariant 12).
func TestPlace_MarkOfAnEarlierSKUDoesNotBlock(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	r := newRig(t, dsn, rigOptions{})
	sku := wiringtest.CreateSKU(t, r.Store, 5, 1)
	old := service.RefOf(sku)
	old.Incarnation -= 1e6 // created a second earlier, in the database before
	marks := appMarks(r)
	if err := marks.SetMark(context.Background(), old, 1<<40); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "u", Quantity: 1}); err != nil {
		t.Fatalf("Place under an earlier SKU's sold-out mark = %v; want an order", err)
	}
	if m, err := marks.Mark(context.Background(), service.RefOf(sku)); err != nil || m != 0 {
		t.Errorf("Mark(this sku) = %d, %v; want 0 (the mark is another SKU's)", m, err)
	}
	testenv.CheckInvariants(t, r.DB, sku.ID)
}

func appMarks(r *rig) service.SoldOutMarks {
	return locking.NewRedisMarks(r.Redis, r.Prefix+"soldout:", time.Minute)
}
