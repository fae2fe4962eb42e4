package repository_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/seckill/seckill/service"
)

// TestCommitBatch_FenceAcrossBackendSwitch: Redis fences are
// microsecond-seeded, ZooKeeper fences are service.ZooKeeperFences plus a
// zxid. A switch either way resets the comparison (no SKU is left refusing
// every write), and within one backend a stale fence is still refused.
func TestCommitBatch_FenceAcrossBackendSwitch(t *testing.T) {
	const (
		redis = int64(1_760_000_000_000_000) // a Redis fence seeded from the clock in µs
		zk    = service.ZooKeeperFences      // plus a zxid: epoch<<32 | counter
	)
	steps := []struct {
		name   string
		fence  int64
		refuse bool
	}{
		{"redis holder", redis + 10, false},
		{"stale redis holder", redis + 9, true},
		{"switch to zookeeper", zk + 1<<32 + 5, false},
		{"stale zookeeper holder", zk + 1<<32 + 4, true},
		{"zookeeper after a leader change", zk + 2<<32 + 1, false},
		{"switch back to redis", redis + 11, false},
		{"stale redis holder after the switch back", redis + 10, true},
		{"redis counter re-seeded later", redis + 5_000_000, false},
	}
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			t.Parallel()
			_, s, sku := setup(t, 100, 100)
			ctx := context.Background()
			sold := int64(0)
			for i, st := range steps {
				b := batch(sku.ID, st.fence, fmt.Sprintf("u%d", i))
				_, err := commitIn(ctx, s, b, shared)
				refused := errors.Is(err, service.ErrConflict) || errors.Is(err, service.ErrStaleFence)
				if err != nil && !refused {
					t.Fatalf("%s: CommitBatch(fence %d) = %v", st.name, st.fence, err)
				}
				if refused != st.refuse {
					t.Errorf("%s: CommitBatch(fence %d) = %v; want refused %v", st.name, st.fence, err, st.refuse)
				}
				if err == nil {
					sold++
				}
				got, err := s.SKU(ctx, sku.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Sold != sold || got.Stock != 100-sold {
					t.Fatalf("%s: sold %d stock %d; want %d, %d", st.name, got.Sold, got.Stock, sold, 100-sold)
				}
			}
		})
	}
}
