package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// The order lifecycle. An order is created pending: its units
// are taken from stock (skus.sold counts them) until it is paid, or until
// it is cancelled by its buyer or expires unpaid, which returns them:
//
//	pending ──pay──────────────→ paid
//	   ├─────cancel (buyer)────→ cancelled   units return to stock
//	   └─────expires_at passed─→ expired     units return to stock (the sweeper)
//
// Every transition is one conditional UPDATE of the order's status
// (WHERE status = 'pending'), in the same transaction as the stock it
// returns, so the database itself refuses a second transition: a unit is
// returned once whoever tries twice (two sweepers, a cancel racing the
// sweep, a payment racing the expiry). A returned unit is published as a
// restock (Orders.Restocked): the sold-out marks of every instance clear
// as for an admin's restock, and the unit is sold again through the
// normal order path, to the first buyer whose batch finds it.

// OrderStatus is where an order is in its lifecycle.
type OrderStatus string

// Order statuses. Only pending changes; the others are final.
const (
	OrderPending   OrderStatus = "pending"
	OrderPaid      OrderStatus = "paid"
	OrderCancelled OrderStatus = "cancelled"
	OrderExpired   OrderStatus = "expired"
)

// Lifecycle errors: the order is not pending, so the transition asked
// for is refused and nothing changed. The handler answers each 409 with
// its own stable code.
var (
	ErrOrderPaid      = errors.New("order already paid")
	ErrOrderCancelled = errors.New("order cancelled")
	ErrOrderExpired   = errors.New("order expired unpaid")
)

// ErrOfStatus is the error that refuses changing an order in a final
// status other than the one asked for.
func ErrOfStatus(s OrderStatus) error {
	switch s {
	case OrderPaid:
		return ErrOrderPaid
	case OrderCancelled:
		return ErrOrderCancelled
	case OrderExpired:
		return ErrOrderExpired
	}
	return nil
}

// Settlement is what a transition did: the order as it now stands,
// whether this call changed it (false for an idempotent repeat) and, when
// its units went back to stock, the SKU's row after the return.
type Settlement struct {
	Order    Order
	Changed  bool
	Returned *SKU
}

// ExpiryRun is one sweep transaction: expire up to Limit pending orders
// whose expires_at is at or before Now, under the sweeper's lease Fence
// (0 when the lock backend has none: the status guard alone then holds).
type ExpiryRun struct {
	Fence int64
	Now   time.Time
	Limit int
}

// Expiry is what one sweep transaction returned.
type Expiry struct {
	Orders int
	Units  int64
	SKUs   []SKU     // the SKUs that got units back, as committed
	Oldest time.Time // the earliest expires_at among the orders expired; zero if none
}

// LifecycleStore is what the lifecycle needs of the database. Each method
// is one transaction whose status change is conditional on the order
// still being pending.
type LifecycleStore interface {
	// PayOrder marks a pending order paid when now is before its
	// expires_at. An order already paid is returned as it is (an
	// idempotent confirmation); one cancelled or expired, or pending past
	// its expires_at, is refused with ErrOfStatus and left as it is.
	PayOrder(ctx context.Context, id int64, now time.Time) (Settlement, error)
	// CancelOrder cancels buyer's pending order and returns its units in
	// the same transaction (buyer "" is anyone, for auth.shopper none).
	// An order already cancelled is returned as it is; paid or expired,
	// refused with ErrOfStatus; someone else's is ErrNotFound.
	CancelOrder(ctx context.Context, id int64, buyer string, now time.Time) (Settlement, error)
	// ExpireDue expires due pending orders and returns their units, in ONE
	// transaction that first advances the leader fence: ErrStaleFence,
	// with nothing written, when a newer lease already wrote.
	ExpireDue(ctx context.Context, run ExpiryRun) (Expiry, error)
}

// LifecycleObserver receives what the lifecycle does, for metrics.
type LifecycleObserver interface {
	// OrderSettled counts orders that left pending for status and the
	// units they returned to stock (0 for payments).
	OrderSettled(status OrderStatus, orders int, units int64)
	// Swept records one sweep transaction: how long it took and how late
	// its oldest order was.
	Swept(took, lag time.Duration, err error)
	// SweeperLeader reports whether this process holds the sweeper's lease.
	SweeperLeader(on bool)
}

type nopLifecycleObserver struct{}

func (nopLifecycleObserver) OrderSettled(OrderStatus, int, int64)      {}
func (nopLifecycleObserver) Swept(time.Duration, time.Duration, error) {}
func (nopLifecycleObserver) SweeperLeader(bool)                        {}

// Lifecycle pays and cancels orders; the Sweeper expires them.
type Lifecycle struct {
	store  LifecycleStore
	orders *Orders
	log    *slog.Logger
	obs    LifecycleObserver
}

// NewLifecycle returns the payment and cancellation of orders; returned
// units are published through orders as restocks. obs may be nil.
func NewLifecycle(store LifecycleStore, orders *Orders, log *slog.Logger, obs LifecycleObserver) *Lifecycle {
	if obs == nil {
		obs = nopLifecycleObserver{}
	}
	return &Lifecycle{store: store, orders: orders, log: log, obs: obs}
}

// Pay records the payment system's confirmation for order id. It is
// idempotent; a cancelled or expired order is refused with
// ErrOrderCancelled or ErrOrderExpired and stays as it is.
func (l *Lifecycle) Pay(ctx context.Context, id int64) (Order, error) {
	st, err := retryConflicts(ctx, func() (Settlement, error) { return l.store.PayOrder(ctx, id, now()) })
	if err != nil {
		return Order{}, err
	}
	if st.Changed {
		l.obs.OrderSettled(OrderPaid, 1, 0)
	}
	return st.Order, nil
}

// Cancel cancels buyer's pending order (buyer "" when shoppers are not
// verified: the opaque id is then the capability) and returns its units
// to stock, sellable again on every instance. It is idempotent; a paid or
// expired order is refused with ErrOrderPaid or ErrOrderExpired.
func (l *Lifecycle) Cancel(ctx context.Context, id int64, buyer string) (Order, error) {
	st, err := retryConflicts(ctx, func() (Settlement, error) { return l.store.CancelOrder(ctx, id, buyer, now()) })
	if err != nil {
		return Order{}, err
	}
	if st.Returned != nil {
		l.obs.OrderSettled(OrderCancelled, 1, st.Order.Quantity)
		l.orders.Restocked(ctx, *st.Returned)
	}
	return st.Order, nil
}

// settleAttempts bounds the transactions of one payment or cancel whose
// row locks met a deadlock or a lock wait that timed out.
const settleAttempts = 3

// retryConflicts runs a transition again when the database rolled it back
// for a conflict (nothing was written), a bounded number of times; then
// the caller hears ErrUnavailable (503, retry: the transitions are
// idempotent).
func retryConflicts(ctx context.Context, settle func() (Settlement, error)) (Settlement, error) {
	var err error
	for attempt := range settleAttempts {
		if attempt > 0 {
			backoff(ctx, attempt+3)
		}
		var st Settlement
		if st, err = settle(); !errors.Is(err, ErrConflict) {
			return st, err
		}
	}
	return Settlement{}, fmt.Errorf("%w: the order's rows stayed contended: %w", ErrUnavailable, err)
}

// now is the lifecycle's clock, at the database's precision.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// OrderUnits returns the units of the SKU's pending and paid orders: the
// admin view of what sold (sold = pending + paid).
func (c *Catalog) OrderUnits(ctx context.Context, skuID int64) (pending, paid int64, err error) {
	return c.store.OrderUnits(ctx, skuID)
}

// OrderUnitsOf is OrderUnits for a page of SKUs, in one read; a SKU
// missing from the map has none.
func (c *Catalog) OrderUnitsOf(ctx context.Context, skuIDs []int64) (map[int64]Units, error) {
	if len(skuIDs) == 0 {
		return nil, nil
	}
	return c.store.OrderUnitsOf(ctx, skuIDs)
}
