// Package repository implements what the domain and the engine read and
// write of the database (service.OrderReader, SKUReader, CatalogStore,
// SKUOrders, LifecycleStore; engine.Committer, asserted in app) on each
// database the service runs on: MySQL (or MariaDB), its database
// (NewMySQL), and SQLite, for the quick start only (NewSQLite). Every
// stock decrement is a conditional UPDATE with its rows affected checked,
// and the schema refuses what must never be written.
//
// The two stores are two types of one package, neither branching on the
// other. Each commits a batch its own way: MySQL in raw multi-statement
// round trips on a connection it holds (mysql*.go), SQLite through GORM a
// statement at a time (sqlite.go). What they share is most of the code:
// the decision (member.decide, resolve), the rows, the translation of
// driver errors, and the GORM reads, admin writes and order lifecycle
// (gormStore, which both embed). As a package per database, that half
// would be exported for the siblings' sake alone.
package repository

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/service"
)

// gormStore is what both stores do alike, through GORM: reads, admin
// writes and the order lifecycle.
type gormStore struct {
	db *gorm.DB
	// hold is the payment window of an order allotted to a waiter
	// (WithPaymentTimeout); 0: paid at once.
	hold time.Duration
	// events: every change of an order writes its event (WithEvents).
	events bool
}

// Order returns one order, or service.ErrNotFound.
func (s *gormStore) Order(ctx context.Context, id int64) (service.Order, error) {
	var r orderRow
	if err := s.db.WithContext(ctx).Take(&r, id).Error; err != nil {
		return service.Order{}, translate(err, service.ErrNotFound)
	}
	return r.domain(), nil
}

// OrdersByID returns the orders of ids that exist, in one read on the
// primary key: the long-polls' recheck (service.Watch).
func (s *gormStore) OrdersByID(ctx context.Context, ids []int64) ([]service.Order, error) {
	var rows []orderRow
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, translate(err, service.ErrNotFound)
	}
	out := make([]service.Order, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// OrderByKey returns the order userID placed under an idempotency key, or
// service.ErrNotFound.
func (s *gormStore) OrderByKey(ctx context.Context, userID, key string) (service.Order, error) {
	var r orderRow
	if err := s.db.WithContext(ctx).Where("user_id = ? AND idempotency_key = ?", userID, key).Take(&r).Error; err != nil {
		return service.Order{}, translate(err, service.ErrNotFound)
	}
	return r.domain(), nil
}

// SKU returns one SKU, or service.ErrSKUNotFound.
func (s *gormStore) SKU(ctx context.Context, id int64) (service.SKU, error) {
	var r skuRow
	if err := s.db.WithContext(ctx).Take(&r, id).Error; err != nil {
		return service.SKU{}, translate(err, service.ErrSKUNotFound)
	}
	return r.domain(), nil
}

// CreateSKU inserts a SKU and returns it with its id.
func (s *gormStore) CreateSKU(ctx context.Context, sku service.SKU) (service.SKU, error) {
	r := skuRow{service.SKU{
		Name: sku.Name, TotalStock: sku.TotalStock, Stock: sku.Stock, PerUserLimit: sku.PerUserLimit,
		StartsAt: columnTimePtr(sku.StartsAt), EndsAt: columnTimePtr(sku.EndsAt),
		CreatedAt: columnTime(sku.CreatedAt), UpdatedAt: columnTime(sku.UpdatedAt),
	}}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		return service.SKU{}, translate(err, service.ErrNotFound)
	}
	return r.domain(), nil
}

// SetStock sets the remaining stock (total_stock follows, keeping stock +
// sold == total_stock) and bumps the version, so a batch that read the
// old stock retries; the SKU's waiting orders are served from it first,
// in the same transaction (allot).
func (s *gormStore) SetStock(ctx context.Context, id, stock int64) (service.SKU, []service.Order, error) {
	var (
		out      skuRow
		allotted []service.Order
	)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		r := tx.Model(&skuRow{}).Where("id = ?", id).Updates(map[string]any{
			"stock":       stock,
			"total_stock": gorm.Expr("sold + ?", stock),
			"version":     gorm.Expr("version + 1"),
			"updated_at":  columnTime(time.Now()),
		})
		if r.Error != nil {
			return r.Error
		}
		if r.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		skus, given, err := s.allot(tx, []int64{id}, columnTime(time.Now()))
		if err != nil {
			return err
		}
		out, allotted = skuRow{skus[0]}, given
		return nil
	})
	if err != nil {
		return service.SKU{}, nil, translate(err, service.ErrSKUNotFound)
	}
	return out.domain(), allotted, nil
}

// OrdersBySKU returns up to limit orders of a SKU with ids above after,
// oldest first.
func (s *gormStore) OrdersBySKU(ctx context.Context, skuID, after int64, limit int) ([]service.Order, error) {
	return s.orderPage(ctx, "sku_id = ? AND id > ?", skuID, after, limit)
}

// Ping reports whether the database answers.
func (s *gormStore) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %w", service.ErrUnavailable, err)
	}
	return nil
}
