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
	// Waiters is how many of the new orders wait (OrderWaiting): they take
	// no stock, and count toward the SKU's waiters.
	Waiters int64
	// Bought is what each user whose holding changed holds after the batch,
	// a waiting order's quantity included.
	Bought map[string]int64
}

// Holding is what a buyer already holds of a SKU: the units of its live
// orders, a waiting order's included, and whether it has one waiting.
type Holding struct {
	Units   int64
	Waiting bool
}

// BuyerKey is an idempotency key scoped to its buyer: the same key of two
// buyers names two orders.
type BuyerKey struct{ UserID, Key string }

// KeyOf is r's idempotency key, scoped to its buyer.
func KeyOf(r OrderRequest) BuyerKey { return BuyerKey{r.UserID, r.IdempotencyKey} }

// Allocate decides batch b on sku, given the orders committed under its
// idempotency keys and what its buyers already hold. It is pure: the store
// runs it between its reads and its conditional writes. A request with
// Wait that no unit can serve now, on sale and within its buyer's limit,
// becomes a waiting order (at most one per buyer, b.WaitlistMax per SKU):
// the database is never left to refuse it.
func Allocate(sku SKU, b Batch, existing map[BuyerKey]Order, held map[string]Holding) Allocation {
	reqs := b.Requests
	a := Allocation{
		Outcomes: make([]Outcome, len(reqs)),
		Alias:    map[int]int{},
		Bought:   map[string]int64{},
	}
	stock := sku.Stock
	active := sku.Active(b.Now)
	keyed := map[BuyerKey]int{} // idempotency key → request index that owns it
	waits := map[string]bool{}  // buyers given a waiting order by this batch
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
		units, ok := a.Bought[r.UserID]
		if !ok {
			units = held[r.UserID].Units
		}
		switch {
		case !active:
			a.Outcomes[i] = Outcome{Err: ErrSaleNotActive}
		case units+r.Quantity > sku.PerUserLimit:
			a.Outcomes[i] = Outcome{Err: ErrLimitExceeded}
		case r.Quantity <= stock:
			stock -= r.Quantity
			a.Units += r.Quantity
			a.create(i, sku, r, b.Now, units)
		case !r.Wait && stock == 0:
			a.Outcomes[i] = Outcome{Err: ErrSoldOut}
		case !r.Wait:
			a.Outcomes[i] = Outcome{Err: ErrInsufficientStock}
		case held[r.UserID].Waiting || waits[r.UserID]:
			a.Outcomes[i] = Outcome{Err: ErrAlreadyWaiting}
		case sku.Waiters+a.Waiters >= b.WaitlistMax:
			a.Outcomes[i] = Outcome{Err: ErrWaitlistFull}
		default:
			waits[r.UserID] = true
			o := a.create(i, sku, r, b.Now, units)
			o.Status = OrderWaiting
			if sku.EndsAt != nil { // it lapses when the sale ends
				end := *sku.EndsAt
				o.ExpiresAt = &end
			}
			a.Outcomes[i].Placed.Position = sku.Waiters + a.Waiters // by joining; the store counts by arrival
			a.Waiters++
		}
	}
	return a
}

// create makes request i a new order, its buyer holding units before it.
func (a *Allocation) create(i int, sku SKU, r OrderRequest, now time.Time, units int64) *Order {
	a.Bought[r.UserID] = units + r.Quantity
	a.New = append(a.New, i)
	a.Outcomes[i] = Outcome{Placed: Placed{Created: true, Order: Order{
		SKUID:          sku.ID,
		UserID:         r.UserID,
		Quantity:       r.Quantity,
		IdempotencyKey: r.IdempotencyKey,
		CreatedAt:      now,
		Arrival:        r.Arrival,
	}}}
	return &a.Outcomes[i].Placed.Order
}

// Writes reports whether the batch writes anything: units sold or
// orders waiting.
func (a *Allocation) Writes() bool { return a.Units > 0 || a.Waiters > 0 }

// Resolve copies the store-assigned IDs of new orders into their aliases.
// The store calls it after filling Outcomes[New[k]].Placed.Order.ID.
func (a *Allocation) Resolve() {
	for i, j := range a.Alias {
		a.Outcomes[i] = Outcome{Placed: Placed{Order: a.Outcomes[j].Placed.Order}}
	}
}

// Hold makes the new orders but the waiting pending until CreatedAt plus timeout, or paid
// at once when timeout is 0. The store calls it before inserting.
func (a *Allocation) Hold(timeout time.Duration) {
	for _, i := range a.New {
		o := &a.Outcomes[i].Placed.Order
		if o.Status == OrderWaiting {
			continue // it holds no unit: nothing to pay yet
		}
		if timeout <= 0 {
			o.Status = OrderPaid
			continue
		}
		due := o.CreatedAt.Add(timeout)
		o.Status, o.ExpiresAt = OrderPending, &due
	}
}
