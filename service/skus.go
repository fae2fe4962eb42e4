package service

import (
	"context"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// NewSKU is what an admin asks to create.
type NewSKU struct {
	Name         string
	Stock        int64
	PerUserLimit int64 // 0 means 1
	StartsAt     *time.Time
	EndsAt       *time.Time
}

// nameProblem says why name cannot name a SKU, or "" when it can: it is
// shown to shoppers, so it must print as what it says (no control
// characters: no escape sequence, NUL or line break).
func nameProblem(name string) string {
	switch {
	case strings.TrimSpace(name) == "":
		return "name must not be empty"
	case utf8.RuneCountInString(name) > MaxNameLen:
		return "name must be at most 200 characters"
	case !utf8.ValidString(name):
		return "name must be UTF-8"
	case strings.ContainsFunc(name, unicode.IsControl):
		return "name must not contain control characters"
	}
	return ""
}

// Validate reports ErrInvalid, wrapped with the reason.
func (n NewSKU) Validate() error {
	switch {
	case nameProblem(n.Name) != "":
		return invalid(nameProblem(n.Name))
	case n.Stock < 0 || n.Stock > MaxStock:
		return invalid("stock must be between 0 and 2^40")
	case n.PerUserLimit < 0 || n.PerUserLimit > MaxQuantity:
		return invalid("per_user_limit must be between 1 and 2^30")
	case n.StartsAt != nil && n.EndsAt != nil && !n.StartsAt.Before(*n.EndsAt):
		return invalid("starts_at must be before ends_at")
	}
	return nil
}

// CatalogStore is what the catalog reads and writes of the SKUs.
type CatalogStore interface {
	SKU(ctx context.Context, id int64) (SKU, error)
	// SKUs returns up to limit SKUs with ids above after, by id.
	SKUs(ctx context.Context, after int64, limit int) ([]SKU, error)
	CreateSKU(ctx context.Context, s SKU) (SKU, error)
	// SetStock sets the SKU's remaining stock and gives it to the SKU's
	// waiting orders first (Allot), in one transaction; it returns the SKU
	// after and the orders it went to.
	SetStock(ctx context.Context, id, stock int64) (SKU, []Order, error)
	// UpdateSKU applies ch (with SKUChange.Apply) to the SKU in one
	// transaction, bumps its version and keeps the per-user limit copied
	// into the holdings consistent, or returns ErrSKUNotFound or ErrInvalid.
	UpdateSKU(ctx context.Context, id int64, ch SKUChange, now time.Time) (SKU, error)
}

// SKUOrders is what the catalog reads of a SKU's orders, for the admin.
type SKUOrders interface {
	OrdersBySKU(ctx context.Context, skuID, after int64, limit int) ([]Order, error)
	// OrderUnits returns the units of a SKU's pending and of its paid
	// orders (sold = pending + paid).
	OrderUnits(ctx context.Context, skuID int64) (pending, paid int64, err error)
	// OrderUnitsOf is OrderUnits for several SKUs in one read; a SKU
	// without pending or paid orders may be absent from the map.
	OrderUnitsOf(ctx context.Context, skuIDs []int64) (map[int64]Units, error)
}

// Catalog is the admin side: SKUs and their stock.
type Catalog struct {
	store  CatalogStore
	orders SKUOrders
	skus   *Directory
	log    *slog.Logger
}

// NewCatalog returns the admin operations on store, with the SKUs' orders
// read from orders; restocks clear the sold-out marks of skus.
func NewCatalog(store CatalogStore, orders SKUOrders, skus *Directory, log *slog.Logger) *Catalog {
	return &Catalog{store: store, orders: orders, skus: skus, log: log}
}

// Create adds a SKU.
func (c *Catalog) Create(ctx context.Context, n NewSKU) (SKU, error) {
	n.StartsAt, n.EndsAt = utc(n.StartsAt), utc(n.EndsAt) // as the database keeps them
	if err := n.Validate(); err != nil {
		return SKU{}, err
	}
	if n.PerUserLimit == 0 {
		n.PerUserLimit = 1
	}
	now := time.Now().UTC()
	s, err := c.store.CreateSKU(ctx, SKU{
		Name:         n.Name,
		TotalStock:   n.Stock,
		Stock:        n.Stock,
		PerUserLimit: n.PerUserLimit,
		StartsAt:     n.StartsAt,
		EndsAt:       n.EndsAt,
		CreatedAt:    now,
		UpdatedAt:    now,
	})
	if err != nil {
		return SKU{}, err
	}
	c.skus.Restocked(ctx, s) // sellable here at once, not after order.unknown_sku_ttl
	return s, nil
}

// SKU returns one SKU.
func (c *Catalog) SKU(ctx context.Context, id int64) (SKU, error) {
	return c.store.SKU(ctx, id)
}

// SetStock sets a SKU's remaining stock (what is sold stays sold), the
// SKU's waiting orders served first from it, and, when stock is left,
// clears its sold-out mark here and in the shared mark.
func (c *Catalog) SetStock(ctx context.Context, id, stock int64) (SKU, error) {
	if stock < 0 || stock > MaxStock {
		return SKU{}, invalid("stock must be between 0 and 2^40")
	}
	s, allotted, err := c.store.SetStock(ctx, id, stock)
	if err != nil {
		return SKU{}, err
	}
	c.skus.Restocked(ctx, s)
	c.skus.Allotted(ctx, allotted)
	return s, nil
}

// Orders returns up to limit orders of a SKU with ids above after.
func (c *Catalog) Orders(ctx context.Context, skuID, after int64, limit int) ([]Order, error) {
	if limit < 1 || limit > 1000 {
		return nil, invalid("limit must be between 1 and 1000")
	}
	if after < 0 {
		return nil, invalid("after must not be negative")
	}
	if _, err := c.store.SKU(ctx, skuID); err != nil {
		return nil, err
	}
	return c.orders.OrdersBySKU(ctx, skuID, after, limit)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}
