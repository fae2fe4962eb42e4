package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/internal/backoff"
)

// The order lifecycle. A pending order's units are taken from stock
// (skus.sold counts them); a cancel or an expiry returns them:
//
//	pending ──pay──────────────→ paid
//	   ├─────cancel (buyer)────→ cancelled   units return to stock
//	   └─────expires_at passed─→ expired     units return to stock (the sweeper)
//
// Each transition is one UPDATE ... WHERE status = 'pending' in the
// transaction that returns the stock, so a unit is returned once however
// many try (two sweepers, a cancel racing the expiry). A returned unit is
// published as a restock (Directory.Restocked) and sold again as usual.

// OrderStatus is where an order is in its lifecycle.
type OrderStatus string

// Order statuses. Only pending and waiting change; the others are final.
const (
	OrderPending   OrderStatus = "pending"
	OrderPaid      OrderStatus = "paid"
	OrderCancelled OrderStatus = "cancelled"
	OrderExpired   OrderStatus = "expired"
	// OrderWaiting holds no unit: it waits for one to come back (waitlist.go).
	OrderWaiting OrderStatus = "waiting"
	// OrderLapsed waited until the sale ended.
	OrderLapsed OrderStatus = "lapsed"
)

// Lifecycle errors refuse a transition of an order no longer pending;
// nothing changed. Each is a 409 with its own code.
var (
	ErrOrderPaid      = errors.New("order already paid")
	ErrOrderCancelled = errors.New("order cancelled")
	ErrOrderExpired   = errors.New("order expired unpaid")
)

// ErrOfStatus is the error that refuses changing an order in status s:
// a final one, or waiting (which cannot be paid).
func ErrOfStatus(s OrderStatus) error {
	switch s {
	case OrderPaid:
		return ErrOrderPaid
	case OrderCancelled:
		return ErrOrderCancelled
	case OrderExpired:
		return ErrOrderExpired
	case OrderWaiting:
		return ErrOrderWaiting
	case OrderLapsed:
		return ErrOrderLapsed
	}
	return nil
}

// Settlement is what a transition did: the order now, whether this call
// changed it, the SKU's row when units went back to stock (none when a
// waiting order left its line), and the waiting orders they went to.
type Settlement struct {
	Order    Order
	Changed  bool
	Returned *SKU
	Allotted []Order
}

// ExpiryRun is one sweep transaction: expire up to Limit orders due by
// Now under the sweeper's lease Fence (0: the status guard alone).
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
	// Allotted are the waiting orders the returned units went to.
	Allotted []Order
	// Lapsed counts the waiting orders ended by their sale's end.
	Lapsed int
	// Changed are the ids of the orders expired and lapsed.
	Changed []int64
}

// LifecycleStore is what the lifecycle needs of the database: each method
// is one transaction that changes only a pending order.
type LifecycleStore interface {
	// PayOrder marks a pending order paid if now is before its expires_at.
	// A paid order is returned as is; a cancelled, expired or overdue one
	// is refused with ErrOfStatus.
	PayOrder(ctx context.Context, id int64, now time.Time) (Settlement, error)
	// CancelOrder cancels buyer's pending or waiting order (buyer "" is
	// anyone): a pending one's units return and go to the SKU's waiting
	// orders first (Allot); a waiting one leaves the line. A cancelled
	// order is returned as is; a paid, expired or lapsed one is
	// ErrOfStatus; someone else's is ErrNotFound.
	CancelOrder(ctx context.Context, id int64, buyer string, now time.Time) (Settlement, error)
	// ExpireDue expires due orders and returns their units, allotted to
	// waiting orders first, and lapses the waiting orders whose sale
	// ended, in one transaction that first advances the fence:
	// ErrStaleFence, with nothing written, when a newer lease already
	// wrote.
	ExpireDue(ctx context.Context, run ExpiryRun) (Expiry, error)
}

// LifecycleObserver receives what the lifecycle does, for metrics.
type LifecycleObserver interface {
	// OrderSettled counts orders that left pending for status and the
	// units they returned (0 for payments).
	OrderSettled(status OrderStatus, orders int, units int64)
	// Swept records one sweep: its duration and its oldest order's lateness.
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
	store LifecycleStore
	skus  *Directory
	log   *slog.Logger
	obs   LifecycleObserver
}

// NewLifecycle returns the payment and cancellation of orders; returned
// units are restocked through skus. obs may be nil.
func NewLifecycle(store LifecycleStore, skus *Directory, log *slog.Logger, obs LifecycleObserver) *Lifecycle {
	if obs == nil {
		obs = nopLifecycleObserver{}
	}
	return &Lifecycle{store: store, skus: skus, log: log, obs: obs}
}

// Pay records the payment of order id. It is idempotent; a cancelled or
// expired order is refused with ErrOrderCancelled or ErrOrderExpired.
func (l *Lifecycle) Pay(ctx context.Context, id int64) (Order, error) {
	st, err := retryConflicts(ctx, func() (Settlement, error) { return l.store.PayOrder(ctx, id, now()) })
	if err != nil {
		return Order{}, err
	}
	if st.Changed {
		l.obs.OrderSettled(OrderPaid, 1, 0)
		l.skus.Changed(id)
	}
	return st.Order, nil
}

// Cancel cancels buyer's pending order and returns its units to stock;
// buyer is "" when shoppers are not verified (the id is the capability).
// Idempotent; a paid or expired order is refused with ErrOrderPaid or
// ErrOrderExpired.
func (l *Lifecycle) Cancel(ctx context.Context, id int64, buyer string) (Order, error) {
	st, err := retryConflicts(ctx, func() (Settlement, error) { return l.store.CancelOrder(ctx, id, buyer, now()) })
	if err != nil {
		return Order{}, err
	}
	if st.Changed {
		l.skus.Changed(id)
	}
	switch {
	case st.Returned != nil:
		l.obs.OrderSettled(OrderCancelled, 1, st.Order.Quantity)
		l.skus.Restocked(ctx, *st.Returned)
		l.skus.Allotted(ctx, st.Allotted)
	case st.Changed: // it was waiting: it left the line, no unit moved
		l.obs.OrderSettled(OrderCancelled, 1, 0)
	}
	return st.Order, nil
}

// settleAttempts bounds the tries of a payment or cancel that met a
// deadlock or a lock wait timeout.
const settleAttempts = 3

// retryConflicts retries a transition the database rolled back for a
// conflict, then gives up with ErrUnavailable: the client may retry, as
// transitions are idempotent.
func retryConflicts(ctx context.Context, settle func() (Settlement, error)) (Settlement, error) {
	var err error
	for attempt := range settleAttempts {
		if attempt > 0 {
			backoff.Wait(ctx, attempt+3)
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

// OrderUnits returns the units of the SKU's pending and paid orders
// (sold = pending + paid).
func (c *Catalog) OrderUnits(ctx context.Context, skuID int64) (pending, paid int64, err error) {
	return c.orders.OrderUnits(ctx, skuID)
}

// OrderUnitsOf is OrderUnits for a page of SKUs, in one read; a SKU
// missing from the map has none.
func (c *Catalog) OrderUnitsOf(ctx context.Context, skuIDs []int64) (map[int64]Units, error) {
	if len(skuIDs) == 0 {
		return nil, nil
	}
	return c.orders.OrderUnitsOf(ctx, skuIDs)
}
