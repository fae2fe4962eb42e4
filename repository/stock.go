// Package repository implements service.Store over MySQL (or MariaDB)
// and, for the quick start, SQLite. Every stock decrement is a
// conditional UPDATE with its rows affected checked, and the schema
// refuses what must never be written.
package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/mysqlerr"
	"github.com/seckill/seckill/service"
)

var _ service.Store = (*Stock)(nil)

// Stock is the GORM store of SKUs and orders.
type Stock struct {
	db     *gorm.DB
	sql    *sql.DB // MySQL only: the batch commit's multi-statement round trips
	sqlite bool
	// sessions: what each MySQL connection's session holds of ours.
	sessions sessions
	// replicas, when set, confirms commits and reads: every COMMIT then
	// reads its position, and replays and SKU reads are confirmed
	// before they are returned (WithReplicas).
	replicas service.Replicas
}

// Option configures a Stock.
type Option func(*Stock)

// WithReplicas makes the store track where each transaction committed
// (BatchResult.Commit) and confirm the orders and SKUs it reads with r
// (MySQL only).
func WithReplicas(r service.Replicas) Option {
	return func(s *Stock) { s.replicas = r }
}

// New returns a Stock over db, which must have the schema of migrations/.
// MySQL connections must allow multiStatements (database.OpenMySQL's do):
// a batch commits in three round trips.
func New(db *gorm.DB, opts ...Option) *Stock {
	s := &Stock{db: db, sqlite: db.Dialector.Name() == "sqlite"}
	if !s.sqlite {
		s.sql, _ = db.DB() // nil when GORM runs on something other than *sql.DB: the GORM path then serves
		s.sessions.db = s.sql
	}
	for _, o := range opts {
		o(s)
	}
	if s.sql == nil {
		s.replicas = nil // SQLite has no replicas
	}
	return s
}

type skuRow struct {
	ID           int64 `gorm:"primaryKey"`
	Name         string
	TotalStock   int64
	Stock        int64
	Sold         int64
	Version      int64
	Fence        int64
	PerUserLimit int64
	StartsAt     *time.Time
	EndsAt       *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (skuRow) TableName() string { return "skus" }

func (r skuRow) domain() service.SKU {
	return service.SKU{
		ID: r.ID, Name: r.Name, TotalStock: r.TotalStock, Stock: r.Stock, Sold: r.Sold,
		Version: r.Version, Fence: r.Fence, PerUserLimit: r.PerUserLimit,
		StartsAt: r.StartsAt, EndsAt: r.EndsAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// after is the SKU as b's writes leave r when they sell units (r itself
// when they sell none): what decrement's UPDATE, or writes.updateSKUs', sets.
func (r skuRow) after(b service.Batch, units int64) service.SKU {
	sku := r.domain()
	if units == 0 {
		return sku
	}
	sku.Stock -= units
	sku.Sold += units
	sku.Version++
	sku.UpdatedAt = b.Now
	if b.Fence > 0 {
		sku.Fence = b.Fence
	}
	return sku
}

func rowOf(sku service.SKU) skuRow {
	return skuRow{
		ID: sku.ID, Name: sku.Name, TotalStock: sku.TotalStock, Stock: sku.Stock, Sold: sku.Sold,
		Version: sku.Version, Fence: sku.Fence, PerUserLimit: sku.PerUserLimit,
		StartsAt: sku.StartsAt, EndsAt: sku.EndsAt, CreatedAt: sku.CreatedAt, UpdatedAt: sku.UpdatedAt,
	}
}

type orderRow struct {
	ID             int64 `gorm:"primaryKey"`
	SKUID          int64 `gorm:"column:sku_id"`
	UserID         string
	Quantity       int64
	IdempotencyKey *string
	CreatedAt      time.Time
	Status         string
	ExpiresAt      *time.Time
	SettledAt      *time.Time
}

func (orderRow) TableName() string { return "orders" }

func (r orderRow) domain() service.Order {
	o := service.Order{ID: r.ID, SKUID: r.SKUID, UserID: r.UserID, Quantity: r.Quantity, CreatedAt: r.CreatedAt,
		Status: service.OrderStatus(r.Status), ExpiresAt: utcPtr(r.ExpiresAt), SettledAt: utcPtr(r.SettledAt)}
	if r.IdempotencyKey != nil {
		o.IdempotencyKey = *r.IdempotencyKey
	}
	return o
}

type purchaseRow struct {
	SKUID        int64  `gorm:"column:sku_id;primaryKey"`
	UserID       string `gorm:"primaryKey"`
	Quantity     int64
	PerUserLimit int64
}

func (purchaseRow) TableName() string { return "user_purchases" }

// CommitBatch commits b in one transaction: reads, service.Allocate, then
// conditional writes. It returns service.ErrConflict when a guard fails,
// service.ErrStaleFence when a newer fence wrote, and
// service.ErrOutcomeUnknown when a COMMIT cannot be read back. When the
// database refuses one request's row, the requests commit one by one
// (commitEach) so the others do not fail.
func (s *Stock) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	res, err := s.commitOnce(ctx, b)
	if err != nil && len(b.Requests) > 1 && refusesARow(err) {
		return s.commitEach(ctx, b)
	}
	return res, err
}

// commitOnce commits b in one transaction (CommitBatch).
func (s *Stock) commitOnce(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	if s.sql != nil {
		m := &member{b: b}
		if err := s.commitMySQL(ctx, []*member{m}, lockWaitUntil(ctx)); err != nil {
			return service.BatchResult{}, translateBatch(err, b)
		}
		return m.res, m.err
	}
	return s.commitGORM(ctx, b)
}

// Order returns one order, or service.ErrNotFound.
func (s *Stock) Order(ctx context.Context, id int64) (service.Order, error) {
	var r orderRow
	if err := s.db.WithContext(ctx).Take(&r, id).Error; err != nil {
		return service.Order{}, translate(err, service.ErrNotFound)
	}
	return r.domain(), nil
}

// OrderByKey returns the order userID placed under an idempotency key, or
// service.ErrNotFound.
func (s *Stock) OrderByKey(ctx context.Context, userID, key string) (service.Order, error) {
	if s.replicas != nil {
		return s.orderByKeyAt(ctx, userID, key)
	}
	var r orderRow
	if err := s.db.WithContext(ctx).Where("user_id = ? AND idempotency_key = ?", userID, key).Take(&r).Error; err != nil {
		return service.Order{}, translate(err, service.ErrNotFound)
	}
	return r.domain(), nil
}

// SKU returns one SKU, or service.ErrSKUNotFound.
func (s *Stock) SKU(ctx context.Context, id int64) (service.SKU, error) {
	if s.replicas != nil {
		return s.skuAt(ctx, id)
	}
	var r skuRow
	if err := s.db.WithContext(ctx).Take(&r, id).Error; err != nil {
		return service.SKU{}, translate(err, service.ErrSKUNotFound)
	}
	return r.domain(), nil
}

// CreateSKU inserts a SKU and returns it with its id.
func (s *Stock) CreateSKU(ctx context.Context, sku service.SKU) (service.SKU, error) {
	r := skuRow{
		Name: sku.Name, TotalStock: sku.TotalStock, Stock: sku.Stock, PerUserLimit: sku.PerUserLimit,
		StartsAt: columnTimePtr(sku.StartsAt), EndsAt: columnTimePtr(sku.EndsAt),
		CreatedAt: columnTime(sku.CreatedAt), UpdatedAt: columnTime(sku.UpdatedAt),
	}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		return service.SKU{}, translate(err, service.ErrNotFound)
	}
	return r.domain(), nil
}

// SetStock sets the remaining stock (total_stock follows, keeping stock +
// sold == total_stock) and bumps the version, so a batch that read the
// old stock retries.
func (s *Stock) SetStock(ctx context.Context, id, stock int64) (service.SKU, error) {
	var out skuRow
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
		return tx.Take(&out, id).Error
	})
	if err != nil {
		return service.SKU{}, translate(err, service.ErrSKUNotFound)
	}
	return out.domain(), nil
}

// OrdersBySKU returns up to limit orders of a SKU with ids above after,
// oldest first.
func (s *Stock) OrdersBySKU(ctx context.Context, skuID, after int64, limit int) ([]service.Order, error) {
	return s.orderPage(ctx, "sku_id = ? AND id > ?", skuID, after, limit)
}

// Ping reports whether the database answers.
func (s *Stock) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %w", service.ErrUnavailable, err)
	}
	return nil
}

// SQLite's extended result codes the store tells apart; MySQL's are in
// internal/mysqlerr.
const (
	sqliteConstraintCheck  = 275  // SQLITE_CONSTRAINT_CHECK
	sqliteConstraintUnique = 2067 // SQLITE_CONSTRAINT_UNIQUE
)

// violation is what a driver error says about the data.
type violation int

const (
	violationNone   violation = iota // not a constraint: the database failed or refused
	violationUnique                  // a unique key: a concurrent writer inserted first
	violationCheck                   // a CHECK constraint
	violationRetry                   // a deadlock: the server rolled back; a retry re-reads
	violationData                    // a value the column cannot hold: a retry fails alike
)

func violationOf(err error) violation {
	var (
		myErr *mysql.MySQLError
		code  interface{ Code() int }
	)
	switch {
	case errors.As(err, &myErr):
		switch myErr.Number {
		case mysqlerr.DuplicateEntry:
			return violationUnique
		case mysqlerr.CheckViolated, mysqlerr.ConstraintFailed:
			return violationCheck
		case mysqlerr.OutOfRange:
			// Only a holding can leave its INT: past 2^31-1 it is over
			// every per-user limit (at most 2^30), the CHECK's refusal.
			return violationCheck
		case mysqlerr.Deadlock:
			return violationRetry
		case mysqlerr.DataTooLong, mysqlerr.IncorrectString:
			return violationData
		}
	case errors.As(err, &code):
		switch code.Code() {
		case sqliteConstraintUnique:
			return violationUnique
		case sqliteConstraintCheck:
			return violationCheck
		}
	}
	return violationNone
}

// translate maps a driver error to the service's sentinels: a missing row
// to notFound; a unique or CHECK violation or a deadlock to
// service.ErrConflict, which a retry re-reads; anything else to
// service.ErrUnavailable.
func translate(err, notFound error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, service.ErrConflict), errors.Is(err, service.ErrSKUNotFound),
		errors.Is(err, service.ErrStaleFence), errors.Is(err, service.ErrOutcomeUnknown),
		errors.Is(err, service.ErrUnavailable):
		return err
	case errors.Is(err, gorm.ErrRecordNotFound):
		return notFound
	}
	if v := violationOf(err); v != violationNone && v != violationData {
		return fmt.Errorf("%w: %w", service.ErrConflict, err)
	}
	return fmt.Errorf("%w: %w", service.ErrUnavailable, err)
}

// translateBatch is translate for a batch of one SKU. A one-request batch
// whose CHECK failed can only have met the per-user limit.
func translateBatch(err error, b service.Batch) error {
	if len(b.Requests) == 1 && violationOf(err) == violationCheck {
		return fmt.Errorf("%w: %w", service.ErrLimitExceeded, err)
	}
	return translate(err, service.ErrSKUNotFound)
}

// columnTime is t as a DATETIME(6) column keeps it (MySQL 8 rounds below
// a microsecond, MariaDB truncates): created_at is a SKU's identity
// across instances (service.SKURef), so every reader must get what was
// written.
func columnTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func columnTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := columnTime(*t)
	return &u
}
