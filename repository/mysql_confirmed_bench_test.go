package repository

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/service"
)

// BenchmarkPayOrder pays pending orders from 16 and from 64 concurrent
// callers, as the payment system's confirmations arrive, on a primary of
// its own with one local replica (parallel apply): without confirmation
// (replicas=0) and with mysql.min_replicas 1 (replicas=1), each payment
// then answered once the replica has it. The ratio of the two at the same
// payers is the confirmation's cost (docs/performance.md); run the binary
// several times to interleave them.
func BenchmarkPayOrder(b *testing.B) {
	rig := newReplicaRig(b, 1)
	ctx := context.Background()
	if err := rig.set.Replicas[0].Exec(ctx, "STOP SLAVE", "SET GLOBAL slave_parallel_threads = 4", "SET GLOBAL slave_parallel_mode = 'optimistic'", "START SLAVE"); err != nil {
		b.Fatal(err)
	}
	db, r := confirmedDB(b, rig, 24, time.Second)
	for _, tc := range []struct {
		name string
		s    *MySQL
	}{{"replicas=0", NewMySQL(db)}, {"replicas=1", NewMySQL(db, WithReplicas(r))}} {
		for _, payers := range []int{16, 64} {
			b.Run(fmt.Sprintf("payers=%d/%s", payers, tc.name), func(b *testing.B) {
				ids := pendingOrders(b, tc.s, b.N)
				var next atomic.Int64
				b.SetParallelism(payers / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						id := ids[next.Add(1)-1]
						if _, err := tc.s.PayOrder(ctx, id, time.Now().UTC()); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "payments/s")
			})
		}
	}
}

// pendingOrders places n pending orders, 256 a batch, and returns their ids.
func pendingOrders(b *testing.B, s *MySQL, n int) []int64 {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	sku, err := s.CreateSKU(ctx, service.SKU{Name: "pay", TotalStock: int64(n), Stock: int64(n), PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]int64, 0, n)
	for len(ids) < n {
		bt := service.Batch{SKUID: sku.ID, Now: now, PaymentTimeout: time.Hour}
		for i := len(ids); i < min(n, len(ids)+256); i++ {
			bt.Requests = append(bt.Requests, service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1})
		}
		res, err := s.CommitBatch(ctx, bt)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range res.Outcomes {
			ids = append(ids, o.Placed.Order.ID)
		}
	}
	return ids
}
