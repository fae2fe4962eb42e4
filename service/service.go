// Package service is the domain of the flash sale: SKUs, orders and their
// rules (Allocate, the lifecycle, the catalog), the sentinel errors and
// their one outcome table, and the small interfaces its own parts call:
// each reads or writes what it needs of the database (OrderReader,
// SKUReader, CatalogStore, SKUOrders, LifecycleStore), the sweeper's
// election (Elector) and the engine that sells (Seller, package engine).
// It imports neither Gin, GORM nor go-redis, nor any lock package:
// adapters implement what it declares here.
package service

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Domain errors. Adapters wrap driver errors with these (using %w);
// Results gives each its kind, stable code and metric label.
var (
	ErrNotFound    = errors.New("not found")
	ErrSKUNotFound = errors.New("sku not found")
	ErrSoldOut     = errors.New("sold out")
	// ErrInsufficientStock is an order for more units than are left when
	// some are: a smaller quantity may still succeed.
	ErrInsufficientStock   = errors.New("insufficient stock")
	ErrLimitExceeded       = errors.New("per-user limit exceeded")
	ErrSaleNotActive       = errors.New("sale not active")
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
	ErrBusy                = errors.New("too many buyers waiting for this sku")
	// ErrTooManySKUs is returned when this process already runs a queue
	// for order.max_live_skus SKUs: the buyer retries shortly.
	ErrTooManySKUs = errors.New("too many skus with buyers waiting on this instance")
	ErrUnavailable = errors.New("service unavailable")
	ErrInvalid     = errors.New("invalid request")

	// ErrConflict is returned by a store when the conditional UPDATE matched
	// no row because the version or fence moved: the caller retries.
	ErrConflict = errors.New("concurrent update")
	// ErrStaleFence is returned by a store when the SKU row already carries
	// a fence newer than the batch's: another holder took the lock since
	// this lease was obtained. The caller must drop its lease and obtain a
	// new one, never retry with the same fence.
	ErrStaleFence = errors.New("stale fencing token")
	// ErrOutcomeUnknown is returned when a batch's COMMIT may or may not
	// have taken effect and the store could not find out which: buyers are
	// told so (503), never "uncharged".
	ErrOutcomeUnknown = errors.New("order outcome unknown")
	// ErrNoTransaction is returned (wrapped) by a round's commit when no
	// transaction could be begun, for a reason other than its context:
	// committing the round's batches alone would fail the same way.
	ErrNoTransaction = errors.New("no transaction could be begun")
	// ErrLockUnavailable is returned by a lock (the engine's, the
	// sweeper's Elector) when its backend cannot be reached (not when the
	// lock is merely held): the order path then sells without the lock,
	// guarded by the version column alone.
	ErrLockUnavailable = errors.New("lock backend unavailable")
	// ErrLockBusy is returned (wrapped) by a lock whose wait ran out
	// while the lock was visibly in use by live holders (renewed or passed
	// on meanwhile), as opposed to held by one that may have died.
	ErrLockBusy = errors.New("lock busy with live holders")
)

// SKU is a sellable item with its stock.
type SKU struct {
	ID           int64
	Name         string
	TotalStock   int64 // initial stock plus restocks: Stock + Sold
	Stock        int64
	Sold         int64
	Version      int64
	Fence        int64
	PerUserLimit int64
	StartsAt     *time.Time
	EndsAt       *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Waiters counts the SKU's waiting orders (waitlist.go).
	Waiters int64
}

// Active reports whether the sale window contains now.
func (s SKU) Active(now time.Time) bool {
	if s.StartsAt != nil && now.Before(*s.StartsAt) {
		return false
	}
	if s.EndsAt != nil && !now.Before(*s.EndsAt) {
		return false
	}
	return true
}

// Order is one committed purchase. A pending order holds its units until
// ExpiresAt, awaiting payment (see lifecycle.go).
type Order struct {
	ID             int64
	SKUID          int64
	UserID         string
	Quantity       int64
	IdempotencyKey string
	CreatedAt      time.Time
	Status         OrderStatus
	ExpiresAt      *time.Time // nil for an order paid at creation; for a waiting one, when it lapses (the sale's end)
	SettledAt      *time.Time // when it left pending; nil while pending or paid at creation
	Arrival        int64      // unix µs the request arrived (OrderRequest.Arrival); 0 when unknown
	AllocatedAt    *time.Time // when a waiting order was given its units; nil for the others
}

// OrderRequest is what a buyer asks for.
type OrderRequest struct {
	SKUID          int64
	UserID         string
	Quantity       int64
	IdempotencyKey string // optional
	// Wait asks to wait for a unit when none can serve the order now
	// (waitlist.go).
	Wait bool
	// Arrival is when the request arrived (unix µs), as the Seller
	// stamped it: the waitlist's order.
	Arrival int64
}

// Limits on what a buyer can send. Larger values are refused as invalid.
const (
	MaxUserIDLen         = 64
	MaxIdempotencyKeyLen = 128
	MaxQuantity          = 1 << 30
	MaxNameLen           = 200
	MaxStock             = 1 << 40
)

// Validate reports ErrInvalid, wrapped with the reason, for a request that
// can never succeed whatever the stock.
func (r OrderRequest) Validate() error {
	switch {
	case r.SKUID < 1:
		return invalid("sku_id must be a positive integer")
	case strings.TrimSpace(r.UserID) == "":
		return invalid("user_id must not be empty or only spaces")
	case IDProblem(r.UserID) != "":
		return invalid("user_id " + IDProblem(r.UserID))
	case len(r.UserID) > MaxUserIDLen:
		return invalid("user_id must be at most 64 bytes")
	case r.Quantity < 1:
		return invalid("quantity must be at least 1")
	case r.Quantity > MaxQuantity:
		return invalid("quantity must be at most 1073741824")
	case len(r.IdempotencyKey) > MaxIdempotencyKeyLen:
		return invalid("Idempotency-Key must be at most 128 characters")
	case r.IdempotencyKey != "" && IDProblem(r.IdempotencyKey) != "":
		return invalid("Idempotency-Key " + IDProblem(r.IdempotencyKey))
	}
	return nil
}

// Same reports whether o answers r: the idempotency check.
func (o Order) Same(r OrderRequest) bool {
	return o.SKUID == r.SKUID && o.UserID == r.UserID && o.Quantity == r.Quantity
}

type invalidError struct{ reason string }

func (e invalidError) Error() string { return e.reason }
func (e invalidError) Unwrap() error { return ErrInvalid }

func invalid(reason string) error { return invalidError{reason} }

// Placed is the answer to a successful OrderRequest.
type Placed struct {
	Order   Order
	Created bool // false when an idempotent replay found the earlier order
	// Position is, for an order created waiting, the waiters ahead of it
	// in the line, by arrival, when it joined (the store's count; an
	// earlier arrival that joins later goes ahead of it).
	Position int64
}

// Batch is one transaction's worth of requests for one SKU, in arrival
// order. The store commits it only if the SKU's version is still the one
// its transaction read and, when Fence > 0, the stored fence is no newer
// (a holder may commit several batches under one lease; a stale holder's
// fence is older).
type Batch struct {
	SKUID    int64
	Requests []OrderRequest
	Fence    int64 // lock fencing token; 0 when there is none
	Now      time.Time
	// PaymentTimeout is how long the batch's new orders stay pending,
	// awaiting payment; 0: they are paid at creation (see Allocation.Hold).
	PaymentTimeout time.Duration
	// WaitlistMax bounds the SKU's waiting orders (order.waitlist_max):
	// a request with Wait past it is refused ErrWaitlistFull.
	WaitlistMax int64
	// Known is the SKU as the previous batch under the same lock hold left
	// it, or nil. The store may decide the batch on it without reading
	// the SKU, the buyers' holdings or the idempotency keys, provided its
	// writes check all of it (the version guard; every holding new; every
	// key unused) and it decides again on what it reads when any check
	// fails: a change made elsewhere costs one round trip, never a wrong
	// answer.
	Known *SKU
	// KnownOn is the server id that committed Known (Commit.Server), 0
	// when not tracked. A store that tracks it decides on Known only on
	// that server: after a failover the promoted server's row may carry
	// the same version with other contents.
	KnownOn int64
}

// Outcome answers one request of a Batch: a placed order or a domain error.
type Outcome struct {
	Placed Placed
	Err    error
}

// BatchResult is what a committed Batch did.
type BatchResult struct {
	Outcomes []Outcome // one per request, in order
	SKU      SKU       // the SKU as the commit left it
	// ReadsSkipped says the batch was decided on Batch.Known, without
	// reading: its writes found the row, holdings and keys as known.
	ReadsSkipped bool
	// Commit is where the batch's transaction committed, for the replicas
	// to confirm.
	Commit Commit
}

// RoundResult is one batch's answer in a round (a CommitRound): what
// it did, or its own error.
type RoundResult struct {
	BatchResult
	Err error
}

// OneByOne answers a round by giving its batches to commit one after
// another, each in its own transaction: for a store that runs one
// transaction at a time, or a test's that must see every batch.
func OneByOne(ctx context.Context, bs []Batch, commit func(context.Context, Batch) (BatchResult, error)) ([]RoundResult, error) {
	out := make([]RoundResult, len(bs))
	for i, b := range bs {
		out[i].BatchResult, out[i].Err = commit(ctx, b)
	}
	return out, nil
}

// Units are the units of a SKU's pending and of its paid orders.
type Units struct{ Pending, Paid int64 }

// SKURef names one SKU as the database knows it: its id, and its
// created_at in microseconds, which tells it from an earlier SKU of the
// same id in a database since recreated.
type SKURef struct {
	ID          int64
	Incarnation int64
}

// SoldOutMarks is the shared sold-out mark, seen by every instance: a
// hint that spreads a sell-out faster, never the truth. A mark is the SKU
// version it was set at, signed: +v "sold out at version v", -v
// "restocked at version v", 0 "no mark". A mark belongs to one SKURef: a
// mark of another incarnation of the id reads as 0. A mark never replaces
// one of a newer version of the same incarnation, so a late "sold out"
// cannot undo a restock.
type SoldOutMarks interface {
	Mark(ctx context.Context, sku SKURef) (int64, error)
	// SetMark stores mark unless the stored one is of a newer version of
	// the same incarnation.
	SetMark(ctx context.Context, sku SKURef, mark int64) error
}
