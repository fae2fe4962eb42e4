package engine_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// memStore sells one SKU from memory at once: what is left of an order's
// cost is the order path's own (admission, queue, worker, answer). The
// reads of orders, which the order path does not call, are left nil.
type memStore struct {
	service.OrderReader
	mu  sync.Mutex
	sku service.SKU
	id  int64
}

func (s *memStore) SKU(context.Context, int64) (service.SKU, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sku, nil
}

func (s *memStore) CommitBatch(_ context.Context, b service.Batch) (service.BatchResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := service.BatchResult{Outcomes: make([]service.Outcome, len(b.Requests))}
	for i, r := range b.Requests {
		if s.sku.Stock < r.Quantity {
			res.Outcomes[i].Err = service.ErrSoldOut
			continue
		}
		s.sku.Stock -= r.Quantity
		s.sku.Sold += r.Quantity
		s.id++
		res.Outcomes[i].Placed = service.Placed{Created: true, Order: service.Order{ID: s.id, SKUID: r.SKUID, UserID: r.UserID, Quantity: r.Quantity, CreatedAt: b.Now}}
	}
	s.sku.Version++
	res.SKU = s.sku
	return res, nil
}

func (s *memStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	out := make([]service.RoundResult, len(bs))
	for i, b := range bs {
		out[i].BatchResult, out[i].Err = s.CommitBatch(ctx, b)
	}
	return out, nil
}

func (s *memStore) AdoptFence(context.Context, int64, int64, int64) (bool, error) { return false, nil }

// instantLocker grants every lock at once, ranked or not.
type instantLocker struct{ fence atomic.Int64 }

func (l *instantLocker) Obtain(context.Context, string, int64) (engine.Lease, error) {
	return instantLease{l.fence.Add(1)}, nil
}

func (l *instantLocker) Ranks() bool { return true }

type instantLease struct{ fence int64 }

func (l instantLease) Fence() int64                                  { return l.fence }
func (instantLease) Lost() <-chan struct{}                           { return nil }
func (instantLease) Release(context.Context) error                   { return nil }
func (instantLease) Contender() (rank int64, ok bool)                { return 0, false }
func (instantLease) Wanting() <-chan struct{}                        { return nil }
func (instantLease) Keep(context.Context) (bool, error)              { return true, nil }
func (noMarks) Mark(context.Context, service.SKURef) (int64, error)  { return 0, nil }
func (noMarks) SetMark(context.Context, service.SKURef, int64) error { return nil }

type noMarks struct{}

// BenchmarkPlace_InProcess is one order through the order path of one
// instance (production defaults: admission, the SKU's queue in arrival
// order, its worker, the lock's turn, the batch's answer), with a store
// that sells from memory and a lock granted at once: the CPU the path
// itself costs per order, without I/O. Buyers wait for their answers
// 256 at a time per CPU, so the batches fill; "keyed" requests carry an
// Idempotency-Key.
func BenchmarkPlace_InProcess(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		name := "unkeyed"
		if keyed {
			name = "keyed"
		}
		b.Run(name, func(b *testing.B) { placeInProcess(b, keyed) })
	}
}

func placeInProcess(b *testing.B, keyed bool) {
	now := time.Now().UTC()
	store := &memStore{sku: service.SKU{ID: 1, Name: "bench", TotalStock: 1 << 40, Stock: 1 << 40, PerUserLimit: 1, Version: 1, CreatedAt: now, UpdatedAt: now}}
	pc := config.Default()
	orders := newOrders(b, store, store, &instantLocker{}, noMarks{}, nil, wiring.DirectoryConfig(pc), wiring.EngineConfig(pc), nil)
	var next atomic.Int64
	b.SetParallelism(256)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			u := "u" + strconv.FormatInt(next.Add(1), 10)
			r := service.OrderRequest{SKUID: 1, UserID: u, Quantity: 1}
			if keyed {
				r.IdempotencyKey = u
			}
			if _, err := orders.Place(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
