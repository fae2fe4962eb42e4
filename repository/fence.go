package repository

import (
	"context"

	"github.com/seckill/seckill/service"
)

// fenceGuard admits a batch fenced with f (first argument) when the stored
// fence is no newer, or lies above f's backend's ceiling (second argument,
// service.FenceCeiling(f)): it was issued by the other lock backend.
const fenceGuard = "(fence <= ? OR fence > ?)"

// AdoptFence sets the SKU's fence to to if it still holds from, in one
// conditional UPDATE: a fence written meanwhile by a holder's batch stays.
// It changes neither the stock nor the version.
func (s *Stock) AdoptFence(ctx context.Context, id, from, to int64) (bool, error) {
	r := s.db.WithContext(ctx).Exec("UPDATE skus SET fence = ? WHERE id = ? AND fence = ?", to, id, from)
	if r.Error != nil {
		return false, translate(r.Error, service.ErrSKUNotFound)
	}
	return r.RowsAffected == 1, nil
}
