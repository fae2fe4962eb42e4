package repository

import (
	"time"

	"github.com/seckill/seckill/service"
)

// The rows of migrations/ as both stores read and write them.

// skuRow is a skus row: the domain's SKU, whose fields are its columns
// (ID the primary key, the others by GORM's snake_case names).
type skuRow struct{ service.SKU }

func (skuRow) TableName() string { return "skus" }

func (r skuRow) domain() service.SKU { return r.SKU }

// after is the SKU as b's writes leave r when they sell units or add
// waiters (r itself when they write nothing): what decrement's UPDATE, or
// writes.updateSKUs', sets.
func (r skuRow) after(b service.Batch, a *service.Allocation) service.SKU {
	sku := r.domain()
	if !a.Writes() {
		return sku
	}
	sku.Stock -= a.Units
	sku.Sold += a.Units
	sku.Waiters += a.Waiters
	sku.Version++
	sku.UpdatedAt = b.Now
	if b.Fence > 0 {
		sku.Fence = b.Fence
	}
	return sku
}

func rowOf(sku service.SKU) skuRow { return skuRow{sku} }

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
	Arrival        *int64 // NULL before migration 00005
	AllocatedAt    *time.Time
	// JoinedVersion and AllottedVersion are the SKU row's versions the
	// transactions that made the order wait and gave it units wrote: the
	// audit's exact order of the waitlist's events.
	JoinedVersion   *int64
	AllottedVersion *int64
}

func (orderRow) TableName() string { return "orders" }

func (r orderRow) domain() service.Order {
	o := service.Order{ID: r.ID, SKUID: r.SKUID, UserID: r.UserID, Quantity: r.Quantity, CreatedAt: r.CreatedAt,
		Status: service.OrderStatus(r.Status), ExpiresAt: utcPtr(r.ExpiresAt), SettledAt: utcPtr(r.SettledAt),
		AllocatedAt: utcPtr(r.AllocatedAt)}
	if r.IdempotencyKey != nil {
		o.IdempotencyKey = *r.IdempotencyKey
	}
	if r.Arrival != nil {
		o.Arrival = *r.Arrival
	}
	return o
}

// arrivalOf is an order's arrival as its column holds it: NULL when
// unknown.
func arrivalOf(o service.Order) *int64 {
	if o.Arrival == 0 {
		return nil
	}
	a := o.Arrival
	return &a
}

// joinedVersion is the joined_version of o, a new order of a batch that
// read sku: for a waiting one, the version the batch's UPDATE writes,
// exact because the UPDATE is guarded by the version read; NULL for any
// other.
func joinedVersion(o service.Order, sku skuRow) *int64 {
	if o.Status != service.OrderWaiting {
		return nil
	}
	v := sku.Version + 1
	return &v
}

type purchaseRow struct {
	SKUID        int64  `gorm:"column:sku_id;primaryKey"`
	UserID       string `gorm:"primaryKey"`
	Quantity     int64
	PerUserLimit int64
	Waiting      int64 // 1 while the buyer has a waiting order of the SKU
}

func (purchaseRow) TableName() string { return "user_purchases" }

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

// utcPtr returns t in UTC (SQLite hands times back in local time).
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
