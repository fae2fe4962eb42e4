package service

import "time"

// Allocation is one Batch's plan, decided from what its transaction read:
// who gets stock (first come, first served), who is refused, who replays.
type Allocation struct {
	// Outcomes has one entry per request; the store fills in the order ID
	// of those in New or Alias after inserting.
	Outcomes []Outcome
	// New lists the requests that become new orders, in arrival order.
	New []int
	// Alias maps a request to the earlier one of the batch with the same
	// idempotency key, whose order answers it.
	Alias map[int]int
	// Units is the stock the batch takes.
	Units int64
	// Bought is what each user whose holding changed holds after the batch.
	Bought map[string]int64
}

// BuyerKey is an idempotency key scoped to its buyer: the same key of two
// buyers names two orders.
type BuyerKey struct{ UserID, Key string }

// KeyOf is r's idempotency key, scoped to its buyer.
func KeyOf(r OrderRequest) BuyerKey { return BuyerKey{r.UserID, r.IdempotencyKey} }

// Allocate decides a batch, given the orders committed under its
// idempotency keys and what its users already hold. It is pure: the store
// runs it between its reads and its conditional writes.
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
// The store calls it after filling Outcomes[New[k]].Placed.Order.ID.
func (a *Allocation) Resolve() {
	for i, j := range a.Alias {
		a.Outcomes[i] = Outcome{Placed: Placed{Order: a.Outcomes[j].Placed.Order}}
	}
}

// Hold makes the new orders pending until CreatedAt plus timeout, or paid
// at once when timeout is 0. The store calls it before inserting.
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
