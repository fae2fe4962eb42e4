// Package verify checks a finished flash sale for oversell: it reads what the
// database (or, for a deployment it cannot reach, the admin API) says about
// one SKU and reports every broken invariant by name.
//
// A load run is only as convincing as its verifier, so the checks are plain
// arithmetic over a Snapshot; FromDB and FromAPI only gather the numbers.
package verify

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Violation names. They are stable: scripts and tests match on them.
// loadtest/README.md says what each means.
const (
	NegativeStock               = "negative_stock"                 // the SKU's stock is below zero
	StockDoesNotAddUp           = "stock_does_not_add_up"          // stock + sold differs from total_stock
	TotalStockChanged           = "total_stock_changed"            // total_stock is not what the sale had to sell (the initial stock, or what the restocks left)
	Oversold                    = "oversold"                       // more units sold than the sale started with
	NotSoldOut                  = "not_sold_out"                   // the sale was expected to sell out but stock remains
	OrderWithoutDecrement       = "order_without_decrement"        // the orders hold more units than were sold
	UnitSoldWithoutOrder        = "unit_sold_without_order"        // more units were sold than the orders hold
	UserOverLimit               = "user_over_limit"                // a user's orders add up to more than per_user_limit
	PurchasesDisagreeWithOrders = "purchases_disagree_with_orders" // user_purchases does not match the sum of the user's orders
	DuplicateIdempotencyKey     = "duplicate_idempotency_key"      // one buyer's Idempotency-Key names two orders
	AcknowledgedOrderMissing    = "acknowledged_order_missing"     // a client was answered 201/200 with an order that is not there (or belongs to someone else)
	PhantomOrder                = "phantom_order"                  // an order no client was told about, whose user never had a request of unknown outcome that could have placed it
	RefusedButOrdered           = "refused_but_ordered"            // a client was refused (409) after an attempt of unknown outcome, yet its Idempotency-Key names an order
	APIDisagreesWithDatabase    = "api_disagrees_with_database"    // the admin API shows other numbers or other orders than the database
)

// SKU is the stock row of one SKU.
type SKU struct {
	ID           int64 `json:"id"`
	TotalStock   int64 `json:"total_stock"`
	Stock        int64 `json:"stock"`
	Sold         int64 `json:"sold"`
	PerUserLimit int64 `json:"per_user_limit"`
}

// Order is one order row.
type Order struct {
	ID             int64     `json:"id"`
	UserID         string    `json:"user_id"`
	Quantity       int64     `json:"quantity"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	Status         string    `json:"status,omitempty"` // "" where unknown: taken as live
	// SettledAt, AllocatedAt (when a waiting order was given its units)
	// and Waited (placed waiting: 202) are the database's only.
	SettledAt   *time.Time `json:"settled_at,omitempty"`
	Waited      bool       `json:"waited,omitempty"`
	AllocatedAt *time.Time `json:"allocated_at,omitempty"`
}

// Live reports whether the order holds its units: a cancelled or expired
// order gave them back, a waiting or lapsed one never had them.
func (o Order) Live() bool {
	return o.Status != "cancelled" && o.Status != "expired" && o.Status != "waiting" && o.Status != "lapsed"
}

// Snapshot is everything the checks look at, read from one source.
type Snapshot struct {
	Source    string // "database" or "api"
	SKU       SKU
	Orders    []Order
	Purchases map[string]int64 // user_purchases by user; nil (not checked) from the API
	HasTotal  bool             // total_stock is shown; without it, taken as stock + sold
}

// ByID is the snapshot's orders by id.
func (s Snapshot) ByID() map[int64]Order {
	out := make(map[int64]Order, len(s.Orders))
	for _, o := range s.Orders {
		out[o.ID] = o
	}
	return out
}

// Ack is an order a client was told about (201 Created or a 200 replay).
type Ack struct {
	OrderID int64
	UserID  string
}

// Refusal is a keyed request refused with 409 after an attempt whose
// outcome the client never learned (503 or a dropped connection).
type Refusal struct {
	Key    string
	UserID string
	Code   string
}

// Clients is the complete record of what the load's clients were told.
type Clients struct {
	Acknowledged []Ack     // each must exist, for the same user
	Unsure       []string  // once per request, the users left without an answer: only they may own an order nobody was told about
	Refused      []Refusal // after an unknown outcome: their keys must name no order
}

// Expect is what the sale should have ended with.
type Expect struct {
	InitialStock int64
	SoldOut      bool     // require sold == InitialStock and stock == 0
	Clients      *Clients // when set, no order contradicts what a client was told, and none lacks a buyer
}

// Violation is one broken invariant.
type Violation struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

func (v Violation) String() string { return v.Name + ": " + v.Message }

// Report is the outcome of Check.
type Report struct {
	Source     string      `json:"source"`
	SKU        SKU         `json:"sku"`
	Orders     int64       `json:"orders"`
	Units      int64       `json:"units"`
	Users      int         `json:"users"`
	MaxPerUser int64       `json:"max_per_user"`
	Lost       int         `json:"acknowledged_missing"` // acknowledged orders not there for their buyer
	Violations []Violation `json:"violations"`
}

// OK reports whether no invariant is broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Names returns the names of the violations, sorted, without repeats.
func (r Report) Names() []string {
	var names []string
	for _, v := range r.Violations {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ErrNotFound is returned by FromDB when the SKU does not exist.
var ErrNotFound = errors.New("verify: sku not found")

// maxListed bounds how many offenders one message names.
const maxListed = 5

// SellingWindow is the time from the first order to the last, zero with
// fewer than two orders or without their times.
func (s Snapshot) SellingWindow() time.Duration {
	var first, last time.Time
	for _, o := range s.Orders {
		if o.CreatedAt.IsZero() {
			continue
		}
		if first.IsZero() || o.CreatedAt.Before(first) {
			first = o.CreatedAt
		}
		if o.CreatedAt.After(last) {
			last = o.CreatedAt
		}
	}
	return last.Sub(first)
}

// Compare reports where the API's view differs from the database's.
func Compare(db, api Snapshot) []Violation {
	var diffs []string
	if db.SKU.Stock != api.SKU.Stock || db.SKU.Sold != api.SKU.Sold || db.SKU.PerUserLimit != api.SKU.PerUserLimit {
		diffs = append(diffs, fmt.Sprintf("sku %d: database stock %d sold %d limit %d, API stock %d sold %d limit %d",
			db.SKU.ID, db.SKU.Stock, db.SKU.Sold, db.SKU.PerUserLimit, api.SKU.Stock, api.SKU.Sold, api.SKU.PerUserLimit))
	}
	apiByID := api.ByID()
	var orderDiffs []string
	for _, o := range db.Orders {
		a, ok := apiByID[o.ID]
		switch {
		case !ok:
			orderDiffs = append(orderDiffs, fmt.Sprintf("order %d missing from the API", o.ID))
		case a.UserID != o.UserID || a.Quantity != o.Quantity || a.Status != o.Status:
			orderDiffs = append(orderDiffs, fmt.Sprintf("order %d: database %s×%d %s, API %s×%d %s", o.ID, o.UserID, o.Quantity, o.Status, a.UserID, a.Quantity, a.Status))
		}
		delete(apiByID, o.ID)
	}
	extra := make([]int64, 0, len(apiByID))
	for id := range apiByID {
		extra = append(extra, id)
	}
	slices.Sort(extra)
	for _, id := range extra {
		orderDiffs = append(orderDiffs, fmt.Sprintf("order %d listed by the API is not in the database", id))
	}
	if len(orderDiffs) > 0 {
		diffs = append(diffs, fmt.Sprintf("%d order(s) differ: %s", len(orderDiffs), listed(orderDiffs)))
	}
	if len(diffs) == 0 {
		return nil
	}
	return []Violation{{Name: APIDisagreesWithDatabase, Message: strings.Join(diffs, "; ")}}
}

func listed(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:maxListed], ", ") + fmt.Sprintf(", and %d more", len(items)-maxListed)
}
