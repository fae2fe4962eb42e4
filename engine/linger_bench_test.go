package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/procstat"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// BenchmarkPlace_Paced places b.N orders for one SKU at an open, paced
// 2,000 (and 1,000) arrivals per second, in process against the real
// MariaDB and Redis, with order.linger off and at its default: what the
// linger does at a moderate load without HTTP and the load generator
// sharing the CPU. It reports orders per transaction, this process's and
// MariaDB's CPU per order (MariaDB is shared: other work on it counts)
// and the p50/p99 of Place. Run it with a fixed count, e.g.
//
//	go test -run '^$' -bench Paced -benchtime 6000x ./engine/
func BenchmarkPlace_Paced(b *testing.B) {
	for _, rate := range []int{2000, 1000} {
		for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
			b.Run(fmt.Sprintf("rate=%d/linger=%v", rate, linger), func(b *testing.B) { placePaced(b, linger, rate) })
		}
	}
}

func placePaced(b *testing.B, linger time.Duration, rate int) {
	dsn := testenv.Database(b)
	store := repository.NewMySQL(testenv.DB(b, dsn))
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	b.Cleanup(func() { rdb.Close() })
	pc := config.Default()
	pc.Lock.Prefix = testenv.Name("bench:paced:") + ":"
	cfg := wiring.EngineConfig(pc)
	cfg.Linger = linger
	lc := lock.New(rdb, wiring.OrderLockOptions(pc)...)
	b.Cleanup(func() { lc.Close() })
	marks := locking.NewRedisMarks(rdb, pc.Lock.Prefix+"soldout:", pc.SoldOut.SharedTTL)
	orders := newOrders(b, store, store, locking.NewRedisLocker(lc), marks, marks, wiring.DirectoryConfig(pc), cfg, nil)
	now := time.Now().UTC()
	sku, err := store.CreateSKU(context.Background(), service.SKU{Name: "paced", TotalStock: int64(b.N), Stock: int64(b.N), PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		b.Fatal(err)
	}
	dbPID, err := procstat.MariaDB() // shared: other work on it counts
	if err != nil {
		dbPID = -1 // not here: its column is left out
	}

	latencies := make([]time.Duration, b.N)
	errs := make([]error, b.N)
	var wg sync.WaitGroup
	cpu0, db0 := cpuOf(procstat.Self), cpuOf(dbPID)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			t0 := time.Now()
			_, errs[i] = orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "u" + strconv.Itoa(i), Quantity: 1})
			latencies[i] = time.Since(t0)
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu, dbCPU := cpuOf(procstat.Self)-cpu0, cpuOf(dbPID)-db0

	for i, err := range errs {
		if err != nil {
			b.Fatalf("order %d: %v", i, err)
		}
	}
	after, err := store.SKU(context.Background(), sku.ID)
	if err != nil {
		b.Fatal(err)
	}
	if after.Sold != int64(b.N) || after.Stock != 0 {
		b.Fatalf("sold %d, stock %d after %d orders; want all sold", after.Sold, after.Stock, b.N)
	}
	slices.Sort(latencies)
	n := float64(b.N)
	b.ReportMetric(n/float64(max(after.Version-sku.Version, 1)), "orders/txn")
	b.ReportMetric(float64(cpu.Microseconds())/n, "µs-cpu/order")
	if dbPID > 0 {
		b.ReportMetric(float64(dbCPU.Microseconds())/n, "µs-mariadb/order")
	}
	b.ReportMetric(float64(latencies[b.N/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[b.N*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op") // paced: the wall time per order is the rate's
}

// cpuOf is pid's CPU time so far; 0 where /proc cannot tell.
func cpuOf(pid int) time.Duration {
	d, _ := procstat.CPU(pid)
	return d
}
