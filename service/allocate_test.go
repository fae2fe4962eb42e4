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
	arrival := int64(1000)
	wait := func(user string, q int64, key string) OrderRequest {
		arrival++
		r := req(user, q, key)
		r.Wait, r.Arrival = true, arrival
		return r
	}

	tests := []struct {
		name     string
		sku      SKU
		reqs     []OrderRequest
		existing map[BuyerKey]Order
		bought   map[string]Holding
		max      int64   // order.waitlist_max
		want     []error // nil: a placed order
		created  []bool
		units    int64
		waiting  []int64 // each waiting order's position, -1 for the others; nil: none waits
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
			bought: map[string]Holding{"a": {Units: 1}},
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
		{
			name: "wait where units are: an ordinary order",
			sku:  SKU{ID: 7, Stock: 2, PerUserLimit: 2}, max: 10,
			reqs: []OrderRequest{wait("a", 2, "")},
			want: []error{nil}, created: []bool{true}, units: 2, waiting: []int64{-1},
		},
		{
			name: "sold out: those who ask wait, in order behind the line; the others are refused",
			sku:  SKU{ID: 7, Stock: 0, PerUserLimit: 2, Waiters: 5}, max: 10,
			reqs: []OrderRequest{wait("a", 1, ""), req("b", 1, ""), wait("c", 2, "k")},
			want: []error{nil, ErrSoldOut, nil}, created: []bool{true, false, true}, waiting: []int64{5, -1, 6},
		},
		{
			name: "fewer left than asked: wait; a smaller order behind still buys",
			sku:  SKU{ID: 7, Stock: 1, PerUserLimit: 5}, max: 10,
			reqs: []OrderRequest{wait("a", 2, ""), wait("b", 1, ""), req("c", 1, "")},
			want: []error{nil, nil, ErrSoldOut}, created: []bool{true, true, false}, units: 1, waiting: []int64{0, -1, -1},
		},
		{
			name: "the waitlist is bounded: past order.waitlist_max, waitlist_full",
			sku:  SKU{ID: 7, Stock: 0, PerUserLimit: 2, Waiters: 1}, max: 2,
			reqs: []OrderRequest{wait("a", 1, ""), wait("b", 1, "")},
			want: []error{nil, ErrWaitlistFull}, created: []bool{true, false}, waiting: []int64{1, -1},
		},
		{
			name: "waitlist_max 0: nobody waits",
			sku:  SKU{ID: 7, Stock: 0, PerUserLimit: 2}, max: 0,
			reqs: []OrderRequest{wait("a", 1, "")},
			want: []error{ErrWaitlistFull}, created: []bool{false},
		},
		{
			name: "one waiting order per buyer: held, or already in the batch",
			sku:  SKU{ID: 7, Stock: 0, PerUserLimit: 5}, max: 10,
			reqs:   []OrderRequest{wait("a", 1, ""), wait("b", 1, ""), wait("b", 1, "")},
			bought: map[string]Holding{"a": {Units: 1, Waiting: true}},
			want:   []error{ErrAlreadyWaiting, nil, ErrAlreadyWaiting}, created: []bool{false, true, false}, waiting: []int64{-1, 0, -1},
		},
		{
			name: "a waiting order counts toward the per-user limit",
			sku:  SKU{ID: 7, Stock: 0, PerUserLimit: 2}, max: 10,
			reqs:   []OrderRequest{wait("a", 2, "")},
			bought: map[string]Holding{"a": {Units: 1}},
			want:   []error{ErrLimitExceeded}, created: []bool{false},
		},
		{
			name: "no waiting outside the sale window",
			sku:  SKU{ID: 7, Stock: 0, PerUserLimit: 2, EndsAt: &past}, max: 10,
			reqs: []OrderRequest{wait("a", 1, "")},
			want: []error{ErrSaleNotActive}, created: []bool{false},
		},
		{
			name: "a replayed waiting order is found, not made again",
			sku:  SKU{ID: 7, Stock: 0, PerUserLimit: 2, Waiters: 1}, max: 10,
			reqs:     []OrderRequest{wait("a", 1, "k1")},
			existing: map[BuyerKey]Order{{"a", "k1"}: {ID: 41, SKUID: 7, UserID: "a", Quantity: 1, IdempotencyKey: "k1", Status: OrderWaiting}},
			bought:   map[string]Holding{"a": {Units: 1, Waiting: true}},
			want:     []error{nil}, created: []bool{false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Allocate(tt.sku, Batch{Requests: tt.reqs, Now: now, WaitlistMax: tt.max}, tt.existing, tt.bought)
			var units int64
			for i, out := range a.Outcomes {
				if !errors.Is(out.Err, tt.want[i]) || (tt.want[i] == nil) != (out.Err == nil) {
					t.Errorf("request %d: err = %v; want %v", i, out.Err, tt.want[i])
				}
				if out.Placed.Created != tt.created[i] {
					t.Errorf("request %d: created = %v; want %v", i, out.Placed.Created, tt.created[i])
				}
				if out.Placed.Created && out.Placed.Order.Status != OrderWaiting {
					units += out.Placed.Order.Quantity
				}
			}
			if a.Units != tt.units || units != tt.units {
				t.Errorf("Units = %d (sum of created %d); want %d", a.Units, units, tt.units)
			}
			if a.Units > tt.sku.Stock {
				t.Errorf("allocated %d units of %d in stock", a.Units, tt.sku.Stock)
			}
			var waiters int64
			for i, out := range a.Outcomes {
				o := out.Placed.Order
				waits := out.Placed.Created && o.Status == OrderWaiting
				if waits {
					waiters++
				}
				switch {
				case tt.waiting == nil && waits:
					t.Errorf("request %d waits; want no waiting order", i)
				case tt.waiting != nil && waits != (tt.waiting[i] >= 0):
					t.Errorf("request %d waits = %v; want %v", i, waits, tt.waiting[i] >= 0)
				case waits && out.Placed.Position != tt.waiting[i]:
					t.Errorf("request %d position = %d; want %d", i, out.Placed.Position, tt.waiting[i])
				case waits && o.Arrival != tt.reqs[i].Arrival:
					t.Errorf("request %d arrival = %d; want the request's %d", i, o.Arrival, tt.reqs[i].Arrival)
				}
			}
			if a.Waiters != waiters {
				t.Errorf("Waiters = %d; want %d", a.Waiters, waiters)
			}
		})
	}
}

func TestAllocate_AliasGetsTheNewOrderID(t *testing.T) {
	r := OrderRequest{SKUID: 1, UserID: "a", Quantity: 1, IdempotencyKey: "k"}
	a := Allocate(SKU{ID: 1, Stock: 5, PerUserLimit: 5}, Batch{Requests: []OrderRequest{r, r}, Now: time.Now()}, nil, nil)
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
