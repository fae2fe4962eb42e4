package service

import (
	"context"
	"time"
)

// SKUChange is what an admin asks to change on a SKU: a nil field or an
// unset window bound is left as it is; a set bound with a nil Time clears it.
type SKUChange struct {
	Name         *string
	PerUserLimit *int64
	StartsAt     OptionalTime
	EndsAt       OptionalTime
}

// OptionalTime is a nullable time that may be absent from a change.
type OptionalTime struct {
	Set  bool
	Time *time.Time
}

// Empty reports whether the change changes nothing.
func (c SKUChange) Empty() bool {
	return c.Name == nil && c.PerUserLimit == nil && !c.StartsAt.Set && !c.EndsAt.Set
}

// Validate reports ErrInvalid, wrapped with the reason, for a change that
// is invalid whatever the SKU; Apply checks the resulting window.
func (c SKUChange) Validate() error {
	switch {
	case c.Empty():
		return invalid("nothing to change: send name, per_user_limit, starts_at or ends_at")
	case c.Name != nil && nameProblem(*c.Name) != "":
		return invalid(nameProblem(*c.Name))
	case c.PerUserLimit != nil && (*c.PerUserLimit < 1 || *c.PerUserLimit > MaxQuantity):
		return invalid("per_user_limit must be between 1 and 1073741824")
	}
	return nil
}

// Apply returns s with the change made, or ErrInvalid when the sale
// window it leaves is empty. The store calls it on the row it locked.
func (c SKUChange) Apply(s SKU) (SKU, error) {
	if c.Name != nil {
		s.Name = *c.Name
	}
	if c.PerUserLimit != nil {
		s.PerUserLimit = *c.PerUserLimit
	}
	if c.StartsAt.Set {
		s.StartsAt = utc(c.StartsAt.Time)
	}
	if c.EndsAt.Set {
		s.EndsAt = utc(c.EndsAt.Time)
	}
	if s.StartsAt != nil && s.EndsAt != nil && !s.StartsAt.Before(*s.EndsAt) {
		return SKU{}, invalid("starts_at must be before ends_at")
	}
	return s, nil
}

// Update changes a SKU's name, per-user limit or sale window and bumps its
// version, so a batch that read the old row retries. A lowered limit takes
// nothing back from users already above it.
func (c *Catalog) Update(ctx context.Context, id int64, ch SKUChange) (SKU, error) {
	if err := ch.Validate(); err != nil {
		return SKU{}, err
	}
	at := time.Now()
	s, err := c.store.UpdateSKU(ctx, id, ch, at.UTC())
	if err != nil {
		return SKU{}, err
	}
	c.skus.learn(s, at.UnixNano()) // its new window holds here at once
	return s, nil
}

// MaxListLimit is the largest page of SKUs or orders.
const MaxListLimit = 1000

// List returns up to limit SKUs with ids above after, by id.
func (c *Catalog) List(ctx context.Context, after int64, limit int) ([]SKU, error) {
	if limit < 1 || limit > MaxListLimit {
		return nil, invalid("limit must be between 1 and 1000")
	}
	if after < 0 {
		return nil, invalid("after must not be negative")
	}
	return c.store.SKUs(ctx, after, limit)
}
