package service

import (
	"errors"
	"time"
)

// The waitlist: the sale's second act. A buyer who asks to wait (Wait)
// when no unit can serve the order now gets a waiting order, which holds
// no unit but counts toward the buyer's per-user limit. Whenever units
// come back to the SKU (a cancel, an expiry, a restock), the transaction
// that returns them gives them to its waiting orders in arrival order
// (Allot): each that fits becomes pending, with a fresh payment window.
//
//	waiting ──units returned──→ pending (or paid, with no payment window)
//	   ├──────cancel (buyer)──→ cancelled   no unit moves
//	   └──────the sale ends───→ lapsed      (the sweeper)
//
// The SKU's row counts its waiters (SKU.Waiters), bounded by
// order.waitlist_max; a buyer's holding row says whether it waits, one
// waiting order per buyer and SKU (Holding.Waiting), both enforced by
// the database's CHECKs besides Allocate.

// Waitlist errors.
var (
	// ErrWaitlistFull refuses a request to wait when the SKU already has
	// order.waitlist_max waiting orders.
	ErrWaitlistFull = errors.New("waitlist full")
	// ErrAlreadyWaiting refuses a request to wait from a buyer who already
	// has a waiting order of the SKU.
	ErrAlreadyWaiting = errors.New("already waiting for this sku")
	// ErrOrderWaiting refuses paying an order still waiting for its units.
	ErrOrderWaiting = errors.New("order waiting for units")
	// ErrOrderLapsed refuses changing an order that waited until the sale
	// ended.
	ErrOrderLapsed = errors.New("order lapsed at the sale's end")
)

// Allot gives units of sku, its free stock, to the waiting orders of
// line, which are in arrival order: each whose quantity fits what is left
// becomes pending until now plus timeout (paid at once when timeout is 0)
// and is returned, in order. A waiter that does not fit keeps waiting and
// the units go on down the line. Outside the sale window nothing is given:
// the waiters lapse at its end. It is pure: the store runs it in the
// transaction that returns the units, on the line it locked.
func Allot(sku SKU, line []Order, now time.Time, timeout time.Duration) []Order {
	if !sku.Active(now) {
		return nil
	}
	free := sku.Stock
	var given []Order
	for _, o := range line {
		if free == 0 {
			break
		}
		if o.Status != OrderWaiting || o.Quantity > free {
			continue
		}
		free -= o.Quantity
		at := now
		o.AllocatedAt = &at
		if timeout <= 0 {
			o.Status, o.ExpiresAt = OrderPaid, nil
		} else {
			due := now.Add(timeout)
			o.Status, o.ExpiresAt = OrderPending, &due
		}
		given = append(given, o)
	}
	return given
}
