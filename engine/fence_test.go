package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// horizonLocker's leases say their backend's fence horizon, or fail to.
type horizonLocker struct {
	engine.Locker
	horizonErr error
}

func (l *horizonLocker) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	lease, err := l.Locker.Obtain(ctx, key, rank)
	if err != nil {
		return nil, err
	}
	return horizonLease{lease, l.horizonErr}, nil
}

// Ranks is false: the test's leases are obtained as each batch needs one.
func (l *horizonLocker) Ranks() bool { return false }

type horizonLease struct {
	engine.Lease
	err error
}

func (l horizonLease) Horizon(context.Context) (int64, error) { return 0, l.err }

// foreignFenceStore finds every batch's SKU row carrying a fence above
// the batch's, within its backend's range, and fails to adopt it when
// adoptErr is set.
type foreignFenceStore struct {
	engine.Committer
	adoptErr error
	commits  atomic.Int64
}

func (s *foreignFenceStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, s.CommitBatch)
}

func (s *foreignFenceStore) CommitBatch(_ context.Context, b service.Batch) (service.BatchResult, error) {
	s.commits.Add(1)
	return service.BatchResult{}, &service.StaleFenceError{SKUID: b.SKUID, Stored: b.Fence + 1000, Fence: b.Fence}
}

func (s *foreignFenceStore) AdoptFence(ctx context.Context, id, from, to int64) (bool, error) {
	if s.adoptErr != nil {
		return false, s.adoptErr
	}
	return s.Committer.AdoptFence(ctx, id, from, to)
}

// A stored fence above the lease's is checked against the lock backend's
// horizon (fence.go). When the backend or the store cannot say, the
// buyer's 503 carries that cause at once: it is not taken for the lock
// having moved, obtained again and again, and logged as such.
func TestPlace_ForeignFenceCheckThatFailsSaysWhy(t *testing.T) {
	t.Parallel()
	horizonDown, adoptDown := errors.New("horizon unreadable"), errors.New("adopt failed")
	for _, tc := range []struct {
		name       string
		horizonErr error
		adoptErr   error
		want       error
	}{
		{"horizon unreadable", horizonDown, nil, horizonDown},
		{"fence not adopted", nil, adoptDown, adoptDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &foreignFenceStore{adoptErr: tc.adoptErr}
			r := newRig(t, testenv.Database(t), rigOptions{
				Commits: func(s engine.Committer) engine.Committer { store.Committer = s; return store },
				Locker:  func(l engine.Locker) engine.Locker { return &horizonLocker{l, tc.horizonErr} },
			})
			sku := wiringtest.CreateSKU(t, r.Store, 5, 1)
			_, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: sku.ID, UserID: "u", Quantity: 1})
			if !errors.Is(err, service.ErrUnavailable) || !errors.Is(err, tc.want) {
				t.Errorf("Place = %v; want ErrUnavailable carrying %v", err, tc.want)
			}
			if n := store.commits.Load(); n != 1 {
				t.Errorf("%d commits; want 1: a fence check that could not be made is no lock that moved", n)
			}
			if sold := testenv.CheckInvariants(t, r.DB, sku.ID); sold != 0 {
				t.Errorf("sold = %d; want 0", sold)
			}
		})
	}
}
