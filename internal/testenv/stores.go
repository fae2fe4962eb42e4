package testenv

import (
	"context"

	"github.com/seckill/seckill/service"
)

// OneByOne answers a round (service.Store.CommitRound) by giving its
// batches to commit one after another: for a test's store that
// intercepts CommitBatch and must see every batch, shared or not.
func OneByOne(ctx context.Context, bs []service.Batch, commit func(context.Context, service.Batch) (service.BatchResult, error)) ([]service.RoundResult, error) {
	out := make([]service.RoundResult, len(bs))
	for i, b := range bs {
		out[i].BatchResult, out[i].Err = commit(ctx, b)
	}
	return out, nil
}
