package repository

import (
	"context"

	"github.com/seckill/seckill/service"
)

// fenceGuard admits a batch fenced with f (first argument) when the
// stored fence is no newer, or above service.FenceCeiling(f) (second):
// the other lock backend issued it.
const fenceGuard = "(fence <= ? OR fence > ?)"

// AdoptFence sets the SKU's fence from from to to in one conditional
// UPDATE, so a fence a holder's batch wrote meanwhile stays. Stock and
// version are untouched.
func (s *gormStore) AdoptFence(ctx context.Context, id, from, to int64) (bool, error) {
	r := s.db.WithContext(ctx).Exec("UPDATE skus SET fence = ? WHERE id = ? AND fence = ?", to, id, from)
	if r.Error != nil {
		return false, translate(r.Error, service.ErrSKUNotFound)
	}
	return r.RowsAffected == 1, nil
}
