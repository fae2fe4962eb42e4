package repository

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/service"
)

// SKUs returns up to limit SKUs with ids above after, by id.
func (s *gormStore) SKUs(ctx context.Context, after int64, limit int) ([]service.SKU, error) {
	var rows []skuRow
	if err := s.db.WithContext(ctx).Where("id > ?", after).Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, translate(err, service.ErrNotFound)
	}
	out := make([]service.SKU, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// UpdateSKU changes a SKU in one transaction: it locks the row, applies
// ch and writes it with version+1, so a batch that read the old row
// re-reads.
//
// The user_purchases CHECK reads each holding's copy of the per-user
// limit, so a change rewrites them; a holding above a lowered limit keeps
// its quantity as its limit, valid but unable to grow.
func (s *gormStore) UpdateSKU(ctx context.Context, id int64, ch service.SKUChange, now time.Time) (service.SKU, error) {
	var out service.SKU
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row skuRow
		// FOR UPDATE; SQLite's dialect drops it: one writer at a time.
		read := tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
		if err := read.Take(&row, id).Error; err != nil {
			return err
		}
		next, err := ch.Apply(row.domain())
		if err != nil {
			return err
		}
		r := tx.Model(&skuRow{}).Where("id = ? AND version = ?", id, row.Version).Updates(map[string]any{
			"name":           next.Name,
			"per_user_limit": next.PerUserLimit,
			"starts_at":      columnTimePtr(next.StartsAt),
			"ends_at":        columnTimePtr(next.EndsAt),
			"version":        gorm.Expr("version + 1"),
			"updated_at":     columnTime(now),
		})
		if r.Error != nil {
			return r.Error
		}
		if r.RowsAffected != 1 {
			return service.ErrConflict // only without the row lock, on SQLite: never concurrent
		}
		if row.Waiters > 0 && !sameTime(next.EndsAt, row.EndsAt) {
			// A waiting order lapses when its sale ends (its expires_at).
			err := tx.Model(&orderRow{}).Where("sku_id = ? AND status = ?", id, service.OrderWaiting).
				Update("expires_at", columnTimePtr(next.EndsAt)).Error
			if err != nil {
				return err
			}
		}
		if next.PerUserLimit != row.PerUserLimit {
			err := tx.Model(&purchaseRow{}).Where("sku_id = ?", id).Update("per_user_limit",
				gorm.Expr("CASE WHEN quantity > ? THEN quantity ELSE ? END", next.PerUserLimit, next.PerUserLimit)).Error
			if err != nil {
				return err
			}
		}
		var after skuRow
		if err := tx.Take(&after, id).Error; err != nil {
			return err
		}
		out = after.domain()
		return nil
	})
	if err != nil {
		return service.SKU{}, translateAdmin(err)
	}
	return out, nil
}

func sameTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

// translateAdmin is translate for an admin change: a change the SKU
// refuses (ErrInvalid) is the admin's answer, not a driver error.
func translateAdmin(err error) error {
	if errors.Is(err, service.ErrInvalid) {
		return err
	}
	return translate(err, service.ErrSKUNotFound)
}
