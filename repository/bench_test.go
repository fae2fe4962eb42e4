package repository_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/service"
)

// BenchmarkCommitBatch commits batches of n orders for one SKU: the cost
// that one lock hold amortises over n buyers.
func BenchmarkCommitBatch(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			_, s, sku := setupB(b, int64(b.N*n+1), 1)
			ctx := context.Background()
			users := 0
			b.ResetTimer()
			for range b.N {
				bt := service.Batch{SKUID: sku.ID, Now: time.Now().UTC()}
				for range n {
					users++
					bt.Requests = append(bt.Requests, service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", users), Quantity: 1})
				}
				if _, err := s.CommitBatch(ctx, bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "orders/s")
		})
	}
}
