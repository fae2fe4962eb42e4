package repository

import (
	"context"

	"github.com/seckill/seckill/service"
)

// OrdersByUser returns up to limit orders of a user with ids above after,
// oldest first, on the orders_user_id index (migration 00002).
func (s *gormStore) OrdersByUser(ctx context.Context, userID string, after int64, limit int) ([]service.Order, error) {
	return s.orderPage(ctx, "user_id = ? AND id > ?", userID, after, limit)
}

// orderPage returns up to limit orders matching where (whose last
// placeholder is the id to start after), oldest first.
func (s *gormStore) orderPage(ctx context.Context, where string, key any, after int64, limit int) ([]service.Order, error) {
	var rows []orderRow
	err := s.db.WithContext(ctx).Where(where, key, after).Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, translate(err, service.ErrNotFound)
	}
	out := make([]service.Order, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}
