package repository

import (
	"context"

	"github.com/seckill/seckill/service"
)

// CommitRound commits one batch per SKU in one transaction whose
// statements wait at most sharedLockWait for a row lock: a SKU whose row
// is held elsewhere fails the round after a second, instead of the round
// holding the other SKUs' rows for as long as that row stays locked. When
// it returns an error, nothing was committed; it wraps
// service.ErrNoTransaction when no transaction could be begun. The
// service decides which batches share a round, and what to do when one
// fails.
func (s *Stock) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	out := make([]service.RoundResult, len(bs))
	if s.sql == nil {
		// SQLite (the quick start) runs one transaction at a time,
		// in-process: a round is its batches one after another.
		for i, b := range bs {
			out[i].BatchResult, out[i].Err = s.CommitBatch(ctx, b)
		}
		return out, nil
	}
	ms := make([]member, len(bs))
	ptrs := make([]*member, len(bs))
	for i, b := range bs {
		ms[i].b = b
		ptrs[i] = &ms[i]
	}
	if err := s.commitMySQL(ctx, ptrs, sharedLockWait); err != nil {
		return nil, translate(err, service.ErrSKUNotFound)
	}
	for i, m := range ms {
		out[i] = service.RoundResult{BatchResult: m.res, Err: m.err}
	}
	return out, nil
}
