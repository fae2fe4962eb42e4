package repository

import (
	"context"

	"github.com/seckill/seckill/service"
)

// CommitRound commits one batch per SKU in one transaction whose row-lock
// waits are bounded (sharedLockWait): a row held elsewhere fails the
// round in a second instead of stalling the other SKUs' rows. On error
// nothing was committed; service.ErrNoTransaction means none began.
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
