// Package service is the domain of the flash sale: SKUs, orders and their
// rules (Allocate, the lifecycle, the catalog), the sentinel errors and
// their one outcome table, and the interfaces it needs from storage,
// locking and the engine that sells (Seller, package engine). It imports
// neither Gin, GORM nor go-redis: adapters implement what it declares
// here.
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

	// ErrConflict is returned by a Store when the conditional UPDATE matched
	// no row because the version or fence moved: the caller retries.
	ErrConflict = errors.New("concurrent update")
	// ErrStaleFence is returned by a Store when the SKU row already carries
	// a fence newer than the batch's: another holder took the lock since
	// this lease was obtained. The caller must drop its lease and obtain a
	// new one, never retry with the same fence.
	ErrStaleFence = errors.New("stale fencing token")
	// ErrOutcomeUnknown is returned when a batch's COMMIT may or may not
	// have taken effect and the Store could not find out which: buyers are
	// told so (503), never "uncharged".
	ErrOutcomeUnknown = errors.New("order outcome unknown")
	// ErrNoTransaction is returned (wrapped) by Store.CommitRound when no
	// transaction could be begun, for a reason other than its context:
	// committing the round's batches alone would fail the same way.
	ErrNoTransaction = errors.New("no transaction could be begun")
	// ErrLockUnavailable is returned by a Locker when Redis cannot be
	// reached (not when the lock is merely held): the order path then sells
	// without the lock, guarded by the version column alone.
	ErrLockUnavailable = errors.New("lock backend unavailable")
	// ErrLockBusy is returned (wrapped) by a Locker whose wait ran out
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
	ExpiresAt      *time.Time // nil for an order paid at creation
	SettledAt      *time.Time // when it left pending; nil while pending or paid at creation
}

// OrderRequest is what a buyer asks for.
type OrderRequest struct {
	SKUID          int64
	UserID         string
	Quantity       int64
	IdempotencyKey string // optional
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
}

// Batch is one transaction's worth of requests for one SKU, in arrival
// order. The Store commits it only if the SKU's version is still the one
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
	// Known is the SKU as the previous batch under the same lock hold left
	// it, or nil. The Store may decide the batch on it without reading
	// the SKU, the buyers' holdings or the idempotency keys, provided its
	// writes check all of it (the version guard; every holding new; every
	// key unused) and it decides again on what it reads when any check
	// fails: a change made elsewhere costs one round trip, never a wrong
	// answer.
	Known *SKU
	// KnownOn is the server id that committed Known (Commit.Server), 0
	// when not tracked. A Store that tracks it decides on Known only on
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
	// Commit is where the batch's transaction committed, for Replicas.
	Commit Commit
}

// RoundResult is one batch's answer in a round (Store.CommitRound): what
// it did, or its own error.
type RoundResult struct {
	BatchResult
	Err error
}

// OneByOne answers a round by giving its batches to commit one after
// another, each in its own transaction: for a Store that runs one
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

// Store is the source of truth. The implementation must decrement stock
// only through a conditional UPDATE and report ErrConflict when it matched
// no row, so that a retry re-reads.
type Store interface {
	CommitBatch(ctx context.Context, b Batch) (BatchResult, error)
	// CommitRound commits batches of distinct SKUs in one transaction
	// whose statements wait at most a second for a row lock, and answers
	// each: its result, or its own error (ErrSKUNotFound, ErrStaleFence,
	// ErrOutcomeUnknown). An error means nothing was committed.
	CommitRound(ctx context.Context, bs []Batch) ([]RoundResult, error)
	Order(ctx context.Context, id int64) (Order, error)
	// OrderByKey returns the order userID placed under the idempotency
	// key, or ErrNotFound: keys are the buyer's own.
	OrderByKey(ctx context.Context, userID, key string) (Order, error)
	SKU(ctx context.Context, id int64) (SKU, error)
	CreateSKU(ctx context.Context, s SKU) (SKU, error)
	SetStock(ctx context.Context, id, stock int64) (SKU, error)
	OrdersBySKU(ctx context.Context, skuID, after int64, limit int) ([]Order, error)
	// SKUs returns up to limit SKUs with ids above after, by id.
	SKUs(ctx context.Context, after int64, limit int) ([]SKU, error)
	// UpdateSKU applies ch (with SKUChange.Apply) to the SKU in one
	// transaction, bumps its version and keeps the per-user limit copied
	// into the holdings consistent, or returns ErrSKUNotFound or ErrInvalid.
	UpdateSKU(ctx context.Context, id int64, ch SKUChange, now time.Time) (SKU, error)
	// OrdersByUser returns up to limit orders of a user with ids above
	// after, oldest first.
	OrdersByUser(ctx context.Context, userID string, after int64, limit int) ([]Order, error)
	// AdoptFence sets the SKU's fence to to if it is still from, and
	// reports whether it did: the way out of a fence issued by an earlier
	// incarnation of the lock backend (Lease.Horizon).
	AdoptFence(ctx context.Context, id, from, to int64) (bool, error)
	// OrderUnits returns the units of a SKU's pending and of its paid
	// orders (sold = pending + paid).
	OrderUnits(ctx context.Context, skuID int64) (pending, paid int64, err error)
	// OrderUnitsOf is OrderUnits for several SKUs in one read; a SKU
	// without pending or paid orders may be absent from the map.
	OrderUnitsOf(ctx context.Context, skuIDs []int64) (map[int64]Units, error)
	Ping(ctx context.Context) error
}

// Locker obtains per-SKU leases. It returns ErrLockUnavailable (wrapped)
// when its backend cannot be reached, ErrLockBusy (wrapped) when the lock
// was held by live holders until ctx was done, and another error when it
// was held elsewhere, by a holder that showed no sign of life, until ctx
// was done.
type Locker interface {
	// Obtain takes key's lock. When rank is not 0 and the locker Ranks, a
	// free lock goes to the lowest rank waiting (lock.Client.ObtainRanked);
	// otherwise rank is ignored.
	Obtain(ctx context.Context, key string, rank int64) (Lease, error)
	// Ranks reports whether Obtain honours rank: the Redis lock does,
	// ZooKeeper's does not.
	Ranks() bool
}

// Lease is a held lock. Fence, Lost and Release every backend has. The
// others are abilities a backend may lack, declared here so that the
// order path asks each lease, never its type: a lease without one
// answers as the method says.
type Lease interface {
	// Fence is a token strictly greater than any earlier lease's on the
	// same key, or 0 when the backend cannot promise that (Redlock).
	Fence() int64
	// Lost is closed when the lease was found gone while held; nil when
	// nothing watches it.
	Lost() <-chan struct{}
	Release(ctx context.Context) error

	// Wanting is closed once someone else waits for the key; nil when the
	// lease cannot tell (Redlock, ZooKeeper). A lease that tells lets a
	// busy worker hold it past LockHold while nobody waits.
	Wanting() <-chan struct{}
	// Keep holds the lease for another LockHold in one round trip when
	// nobody else wants it, and reports whether it is still held; when
	// another holder waits, or the lease cannot be kept (ZooKeeper's),
	// it releases the lease and reports false.
	Keep(ctx context.Context) (bool, error)
	// Contender returns the lowest rank another contender announced while
	// the lease was held; ok is false when none did or the lease cannot
	// hear (lock.Lock.Contender; fair selling).
	Contender() (rank int64, ok bool)
	// Horizon is the highest fence the backend has issued so far
	// (ZooKeeper's latest zxid): an ensemble recreated empty restarts its
	// fences below those the database still holds, and the horizon tells
	// such a foreign fence from a newer holder's. A backend that cannot
	// say returns math.MaxInt64: any stored fence may be its own.
	Horizon(ctx context.Context) (int64, error)
}

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
