package service

import "time"

// Allocation is the plan for one Batch, decided from what its transaction
// read: who gets stock (first come, first served), who is refused and why,
// and who is an idempotent replay.
type Allocation struct {
	// Outcomes has one entry per request. Entries listed in New or Alias
	// carry an Order whose ID the Store fills in after inserting.
	Outcomes []Outcome
	// New lists the requests that become new orders, in arrival order.
	New []int
	// Alias maps a request to the earlier request of the same batch that
	// used the same idempotency key: it is answered with that order.
	Alias map[int]int
	// Units is the stock the batch takes.
	Units int64
	// Bought is what each user holds of the SKU after the batch, for the
	// users whose holding changed.
	Bought map[string]int64
}

// BuyerKey names an idempotency key as the store keeps it: keys are the
// buyer's own, so the same key of two buyers names two orders.
type BuyerKey struct{ UserID, Key string }

// KeyOf is r's idempotency key, scoped to its buyer.
func KeyOf(r OrderRequest) BuyerKey { return BuyerKey{r.UserID, r.IdempotencyKey} }

// Allocate decides a batch. existing holds the orders already committed
// under the batch's idempotency keys; bought holds what each of the batch's
// users already holds of the SKU. It is pure: the Store runs it between
// its reads and its conditional writes, inside one transaction.
func Allocate(sku SKU, reqs []OrderRequest, existing map[BuyerKey]Order, bought map[string]int64, now time.Time) Allocation {
	a := Allocation{
		Outcomes: make([]Outcome, len(reqs)),
		Alias:    map[int]int{},
		Bought:   map[string]int64{},
	}
	stock := sku.Stock
	active := sku.Active(now)
	keyed := map[BuyerKey]int{} // idempotency key → request index that owns it
	for i, r := range reqs {
		if r.IdempotencyKey != "" {
			k := KeyOf(r)
			if o, ok := existing[k]; ok {
				if o.Same(r) {
					a.Outcomes[i] = Outcome{Placed: Placed{Order: o}}
				} else {
					a.Outcomes[i] = Outcome{Err: ErrIdempotencyConflict}
				}
				continue
			}
			if j, ok := keyed[k]; ok {
				first := reqs[j]
				switch {
				case first.SKUID != r.SKUID || first.UserID != r.UserID || first.Quantity != r.Quantity:
					a.Outcomes[i] = Outcome{Err: ErrIdempotencyConflict}
				case a.Outcomes[j].Err != nil:
					a.Outcomes[i] = a.Outcomes[j]
				default:
					a.Alias[i] = j
				}
				continue
			}
			keyed[k] = i
		}
		held, ok := a.Bought[r.UserID]
		if !ok {
			held = bought[r.UserID]
		}
		switch {
		case !active:
			a.Outcomes[i] = Outcome{Err: ErrSaleNotActive}
		case held+r.Quantity > sku.PerUserLimit:
			a.Outcomes[i] = Outcome{Err: ErrLimitExceeded}
		case stock == 0:
			a.Outcomes[i] = Outcome{Err: ErrSoldOut}
		case r.Quantity > stock:
			a.Outcomes[i] = Outcome{Err: ErrInsufficientStock}
		default:
			stock -= r.Quantity
			a.Units += r.Quantity
			a.Bought[r.UserID] = held + r.Quantity
			a.New = append(a.New, i)
			a.Outcomes[i] = Outcome{Placed: Placed{Created: true, Order: Order{
				SKUID:          sku.ID,
				UserID:         r.UserID,
				Quantity:       r.Quantity,
				IdempotencyKey: r.IdempotencyKey,
				CreatedAt:      now,
			}}}
		}
	}
	return a
}

// Resolve copies the store-assigned IDs of new orders into their aliases.
// The Store calls it after filling Outcomes[New[k]].Placed.Order.ID.
func (a *Allocation) Resolve() {
	for i, j := range a.Alias {
		a.Outcomes[i] = Outcome{Placed: Placed{Order: a.Outcomes[j].Placed.Order}}
	}
}

// Hold sets the status of the new orders: pending until their CreatedAt
// plus timeout, or paid at once when timeout is 0 (order.payment_timeout
// 0: an order is final at creation). The Store calls it after Allocate,
// before inserting.
func (a *Allocation) Hold(timeout time.Duration) {
	for _, i := range a.New {
		o := &a.Outcomes[i].Placed.Order
		if timeout <= 0 {
			o.Status = OrderPaid
			continue
		}
		due := o.CreatedAt.Add(timeout)
		o.Status, o.ExpiresAt = OrderPending, &due
	}
}
