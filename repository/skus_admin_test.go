package repository_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/service"
)

// TestUpdateSKU_LimitFollowsIntoTheHoldings: on either store an edit
// bumps the version, and a lowered per-user limit is copied into every
// holding (a holding above it keeps its quantity as its limit), so the
// CHECK refuses what the new limit refuses and nothing else.
func TestUpdateSKU_LimitFollowsIntoTheHoldings(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			ctx := context.Background()
			now := time.Now().UTC()
			sku, err := s.CreateSKU(ctx, service.SKU{Name: "edit", TotalStock: 10, Stock: 10, PerUserLimit: 5, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CommitBatch(ctx, batch(sku.ID, 0, "a", "a", "a", "b")); err != nil {
				t.Fatal(err)
			}
			name, limit := "edited", int64(2)
			got, err := s.UpdateSKU(ctx, sku.ID, service.SKUChange{Name: &name, PerUserLimit: &limit}, now)
			if err != nil {
				t.Fatalf("UpdateSKU = %v", err)
			}
			if got.Name != name || got.PerUserLimit != limit || got.Version != sku.Version+2 || got.Sold != 4 {
				t.Errorf("UpdateSKU = %+v; want name %q, limit %d, version %d, sold 4", got, name, limit, sku.Version+2)
			}
			var rows []struct {
				UserID       string
				Quantity     int64
				PerUserLimit int64
			}
			if err := db.Raw("SELECT user_id, quantity, per_user_limit FROM user_purchases WHERE sku_id = ? ORDER BY user_id", sku.ID).Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 || rows[0].PerUserLimit != 3 || rows[1].PerUserLimit != 2 {
				t.Errorf("holdings %+v; want a's limit 3 (its quantity), b's 2", rows)
			}
			res, err := s.CommitBatch(ctx, batch(sku.ID, 0, "a", "b", "b"))
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []error{service.ErrLimitExceeded, nil, service.ErrLimitExceeded} {
				if got := res.Outcomes[i].Err; !errors.Is(got, want) {
					t.Errorf("order %d after the edit = %v; want %v", i, got, want)
				}
			}
			assertBooks(t, db, sku.ID, 10, 5, 3)
		})
	}
}

// TestUpdateSKU_RefusalsWriteNothing: on either store an edit of a SKU
// that does not exist is ErrSKUNotFound, and a change the SKU refuses (a
// window that ends before it starts) is ErrInvalid with the row as it was.
func TestUpdateSKU_RefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			_, s := be.open(t)
			ctx := context.Background()
			now := time.Now().UTC()
			name := "x"
			if _, err := s.UpdateSKU(ctx, 12345, service.SKUChange{Name: &name}, now); !errors.Is(err, service.ErrSKUNotFound) {
				t.Errorf("UpdateSKU(missing) = %v; want ErrSKUNotFound", err)
			}
			sku, err := s.CreateSKU(ctx, service.SKU{Name: "t", TotalStock: 1, Stock: 1, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			starts, ends := now.Add(time.Hour), now
			ch := service.SKUChange{Name: &name, StartsAt: service.OptionalTime{Set: true, Time: &starts}, EndsAt: service.OptionalTime{Set: true, Time: &ends}}
			if _, err := s.UpdateSKU(ctx, sku.ID, ch, now); !errors.Is(err, service.ErrInvalid) {
				t.Errorf("UpdateSKU(ends before it starts) = %v; want ErrInvalid", err)
			}
			if got, err := s.SKU(ctx, sku.ID); err != nil || got.Name != sku.Name || got.Version != sku.Version || got.StartsAt != nil {
				t.Errorf("after the refused edit: %+v, %v; want the row as created", got, err)
			}
		})
	}
}
