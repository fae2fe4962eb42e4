package service

import (
	"errors"
	"testing"
	"time"
)

func TestAllocate(t *testing.T) {
	now := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	sku := SKU{ID: 7, Stock: 3, PerUserLimit: 2}
	req := func(user string, q int64, key string) OrderRequest {
		return OrderRequest{SKUID: 7, UserID: user, Quantity: q, IdempotencyKey: key}
	}
	earlier := Order{ID: 41, SKUID: 7, UserID: "a", Quantity: 1, IdempotencyKey: "k1"}

	tests := []struct {
		name     string
		sku      SKU
		reqs     []OrderRequest
		existing map[BuyerKey]Order
		bought   map[string]int64
		want     []error // nil: a placed order
		created  []bool
		units    int64
	}{
		{
			name: "first come first served when stock runs out",
			sku:  sku,
			reqs: []OrderRequest{req("a", 2, ""), req("b", 2, ""), req("c", 1, "")},
			want: []error{nil, ErrInsufficientStock, nil}, created: []bool{true, false, true}, units: 3,
		},
		{
			name:   "per-user limit counts earlier purchases and the batch",
			sku:    sku,
			reqs:   []OrderRequest{req("a", 1, ""), req("a", 1, ""), req("b", 1, "")},
			bought: map[string]int64{"a": 1},
			want:   []error{nil, ErrLimitExceeded, nil}, created: []bool{true, false, true}, units: 2,
		},
		{
			name: "quantity above the limit",
			sku:  sku,
			reqs: []OrderRequest{req("a", 3, "")},
			want: []error{ErrLimitExceeded}, created: []bool{false},
		},
		{
			name:     "replay of a committed key returns the order; another quantity conflicts; another buyer's key is their own",
			sku:      sku,
			reqs:     []OrderRequest{req("a", 1, "k1"), req("a", 2, "k1"), req("b", 1, "k1")},
			existing: map[BuyerKey]Order{{"a", "k1"}: earlier},
			want:     []error{nil, ErrIdempotencyConflict, nil}, created: []bool{false, false, true}, units: 1,
		},
		{
			name: "same key twice in one batch: one order, the second is its replay; another buyer's is another order",
			sku:  sku,
			reqs: []OrderRequest{req("a", 1, "k2"), req("a", 1, "k2"), req("b", 1, "k2"), req("a", 2, "k2")},
			want: []error{nil, nil, nil, ErrIdempotencyConflict}, created: []bool{true, false, true, false}, units: 2,
		},
		{
			name: "sale not started",
			sku:  SKU{ID: 7, Stock: 3, PerUserLimit: 2, StartsAt: &future},
			reqs: []OrderRequest{req("a", 1, "")},
			want: []error{ErrSaleNotActive}, created: []bool{false},
		},
		{
			name: "sale ended",
			sku:  SKU{ID: 7, Stock: 3, PerUserLimit: 2, EndsAt: &past},
			reqs: []OrderRequest{req("a", 1, "")},
			want: []error{ErrSaleNotActive}, created: []bool{false},
		},
		{
			name:     "replay after the sale ended still finds the order",
			sku:      SKU{ID: 7, Stock: 0, PerUserLimit: 2, EndsAt: &past},
			reqs:     []OrderRequest{req("a", 1, "k1")},
			existing: map[BuyerKey]Order{{"a", "k1"}: earlier},
			want:     []error{nil}, created: []bool{false},
		},
		{
			name: "more than is left, some left: insufficient, not sold out",
			sku:  SKU{ID: 7, Stock: 1, PerUserLimit: 5},
			reqs: []OrderRequest{req("a", 2, ""), req("b", 1, ""), req("c", 1, "")},
			want: []error{ErrInsufficientStock, nil, ErrSoldOut}, created: []bool{false, true, false}, units: 1,
		},
		{
			name: "sold out",
			sku:  SKU{ID: 7, Stock: 0, PerUserLimit: 2},
			reqs: []OrderRequest{req("a", 1, "")},
			want: []error{ErrSoldOut}, created: []bool{false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Allocate(tt.sku, tt.reqs, tt.existing, tt.bought, now)
			var units int64
			for i, out := range a.Outcomes {
				if !errors.Is(out.Err, tt.want[i]) || (tt.want[i] == nil) != (out.Err == nil) {
					t.Errorf("request %d: err = %v; want %v", i, out.Err, tt.want[i])
				}
				if out.Placed.Created != tt.created[i] {
					t.Errorf("request %d: created = %v; want %v", i, out.Placed.Created, tt.created[i])
				}
				if out.Placed.Created {
					units += out.Placed.Order.Quantity
				}
			}
			if a.Units != tt.units || units != tt.units {
				t.Errorf("Units = %d (sum of created %d); want %d", a.Units, units, tt.units)
			}
			if a.Units > tt.sku.Stock {
				t.Errorf("allocated %d units of %d in stock", a.Units, tt.sku.Stock)
			}
		})
	}
}

func TestAllocate_AliasGetsTheNewOrderID(t *testing.T) {
	r := OrderRequest{SKUID: 1, UserID: "a", Quantity: 1, IdempotencyKey: "k"}
	a := Allocate(SKU{ID: 1, Stock: 5, PerUserLimit: 5}, []OrderRequest{r, r}, nil, nil, time.Now())
	if len(a.New) != 1 {
		t.Fatalf("New = %v; want one new order", a.New)
	}
	a.Outcomes[a.New[0]].Placed.Order.ID = 99
	a.Resolve()
	if got := a.Outcomes[1].Placed.Order.ID; got != 99 || a.Outcomes[1].Placed.Created {
		t.Errorf("alias = order %d created=%v; want order 99, not created", got, a.Outcomes[1].Placed.Created)
	}
}

func TestOrderRequestValidate(t *testing.T) {
	long := string(make([]byte, 65))
	tests := []struct {
		name string
		r    OrderRequest
		ok   bool
	}{
		{"valid", OrderRequest{SKUID: 1, UserID: "u", Quantity: 1}, true},
		{"zero sku", OrderRequest{SKUID: 0, UserID: "u", Quantity: 1}, false},
		{"empty user", OrderRequest{SKUID: 1, UserID: "", Quantity: 1}, false},
		{"long user", OrderRequest{SKUID: 1, UserID: long, Quantity: 1}, false},
		{"zero quantity", OrderRequest{SKUID: 1, UserID: "u", Quantity: 0}, false},
		{"huge quantity", OrderRequest{SKUID: 1, UserID: "u", Quantity: MaxQuantity + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("Validate(%+v) = %v; want ok=%v", tt.r, err, tt.ok)
			}
		})
	}
}
