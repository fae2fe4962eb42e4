package verify

import (
	"fmt"
	"maps"
	"slices"
)

// Check runs every invariant over s and returns the report.
func Check(s Snapshot, want Expect) Report {
	r := Report{Source: s.Source, SKU: s.SKU}
	r.checkStock(s, want)
	t := tallyOrders(s)
	r.Orders, r.Units, r.Users, r.MaxPerUser = t.orders, t.units, len(t.perUser), t.maxPerUser
	r.checkUnits()
	r.checkLimit(t.perUser)
	if s.Purchases != nil {
		r.checkPurchases(t.perUser, s.Purchases)
	}
	if len(t.dupKeys) > 0 {
		r.add(DuplicateIdempotencyKey, "sku %d: %d key(s) name more than one order: %s", s.SKU.ID, len(t.dupKeys), listed(t.dupKeys))
	}
	if want.Clients != nil {
		r.checkClients(s, t, *want.Clients)
	}
	return r
}

func (r *Report) add(name, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Name: name, Message: fmt.Sprintf(format, args...)})
}

// checkStock checks the SKU's row against itself and the sale's start.
func (r *Report) checkStock(s Snapshot, want Expect) {
	sku := s.SKU
	total := sku.TotalStock
	if !s.HasTotal {
		total = sku.Stock + sku.Sold
	}
	if sku.Stock < 0 {
		r.add(NegativeStock, "sku %d has stock %d", sku.ID, sku.Stock)
	}
	if s.HasTotal && sku.Stock+sku.Sold != sku.TotalStock {
		r.add(StockDoesNotAddUp, "sku %d: stock %d + sold %d = %d, total_stock %d",
			sku.ID, sku.Stock, sku.Sold, sku.Stock+sku.Sold, sku.TotalStock)
	}
	if total != want.InitialStock {
		r.add(TotalStockChanged, "sku %d: total stock is %d, the sale started with %d", sku.ID, total, want.InitialStock)
	}
	if sku.Sold > want.InitialStock {
		r.add(Oversold, "sku %d: sold %d units of an initial stock of %d", sku.ID, sku.Sold, want.InitialStock)
	}
	if want.SoldOut && (sku.Stock != 0 || sku.Sold != want.InitialStock) {
		r.add(NotSoldOut, "sku %d: expected sold out (sold %d, stock 0), got sold %d, stock %d",
			sku.ID, want.InitialStock, sku.Sold, sku.Stock)
	}
}

// orderTally is what the orders add up to: the live ones' units, every
// one's id and key.
type orderTally struct {
	orders, units, maxPerUser int64
	perUser                   map[string]int64
	byKey                     map[[2]string]int64 // keys are the buyer's own
	byID                      map[int64]Order
	dupKeys                   []string
}

func tallyOrders(s Snapshot) orderTally {
	t := orderTally{perUser: map[string]int64{}, byKey: map[[2]string]int64{}, byID: s.ByID()}
	for _, o := range s.Orders {
		switch {
		case o.Live():
			t.orders++
			t.units += o.Quantity
			t.perUser[o.UserID] += o.Quantity
		case o.Status == "waiting": // holds no unit, counts toward the limit
			t.perUser[o.UserID] += o.Quantity
		}
		if o.IdempotencyKey == "" {
			continue
		}
		k := [2]string{o.UserID, o.IdempotencyKey}
		if first, ok := t.byKey[k]; ok {
			t.dupKeys = append(t.dupKeys, fmt.Sprintf("%q of %q (orders %d and %d)", o.IdempotencyKey, o.UserID, first, o.ID))
			continue
		}
		t.byKey[k] = o.ID
	}
	for _, q := range t.perUser {
		t.maxPerUser = max(t.maxPerUser, q)
	}
	return t
}

// checkUnits compares the units the orders hold with sold.
func (r *Report) checkUnits() {
	sku := r.SKU
	switch {
	case r.Units > sku.Sold:
		r.add(OrderWithoutDecrement, "sku %d: %d order(s) hold %d unit(s) but sold is %d: %d unit(s) ordered without a stock decrement",
			sku.ID, r.Orders, r.Units, sku.Sold, r.Units-sku.Sold)
	case r.Units < sku.Sold:
		r.add(UnitSoldWithoutOrder, "sku %d: sold is %d but %d order(s) hold only %d unit(s): %d unit(s) sold without an order",
			sku.ID, sku.Sold, r.Orders, r.Units, sku.Sold-r.Units)
	}
}

func (r *Report) checkLimit(perUser map[string]int64) {
	var over []string
	for _, u := range slices.Sorted(maps.Keys(perUser)) {
		if perUser[u] > r.SKU.PerUserLimit {
			over = append(over, fmt.Sprintf("%s has %d", u, perUser[u]))
		}
	}
	if len(over) > 0 {
		r.add(UserOverLimit, "sku %d: %d user(s) over the per-user limit of %d: %s",
			r.SKU.ID, len(over), r.SKU.PerUserLimit, listed(over))
	}
}

// checkPurchases compares user_purchases with the orders, user by user.
func (r *Report) checkPurchases(perUser, purchases map[string]int64) {
	users := maps.Clone(purchases)
	maps.Copy(users, perUser)
	var off []string
	for _, u := range slices.Sorted(maps.Keys(users)) {
		if perUser[u] != purchases[u] {
			off = append(off, fmt.Sprintf("%s: user_purchases %d, orders %d", u, purchases[u], perUser[u]))
		}
	}
	if len(off) > 0 {
		r.add(PurchasesDisagreeWithOrders, "sku %d: %d user(s): %s", r.SKU.ID, len(off), listed(off))
	}
}

// checkClients holds the orders to what the clients were told: every
// acknowledged order there, every other one explained by an unanswered
// request, no refused key holding one.
func (r *Report) checkClients(s Snapshot, t orderTally, c Clients) {
	acked := r.checkAcknowledged(t.byID, c.Acknowledged)
	r.checkPhantoms(s.Orders, acked, c.Unsure)
	// Without keys in the snapshot (the admin API does not list them) the
	// refusals cannot be checked.
	if len(t.byKey) == 0 {
		return
	}
	var lies []string
	for _, f := range c.Refused {
		if id, ok := t.byKey[[2]string{f.UserID, f.Key}]; ok {
			lies = append(lies, fmt.Sprintf("key %q of %s was refused %s but holds order %d", f.Key, f.UserID, f.Code, id))
		}
	}
	if len(lies) > 0 {
		r.add(RefusedButOrdered, "sku %d: %d of %d refusal(s) after an unknown outcome contradict an order: %s",
			r.SKU.ID, len(lies), len(c.Refused), listed(lies))
	}
}

func (r *Report) checkAcknowledged(byID map[int64]Order, acks []Ack) map[int64]bool {
	var missing []string
	acked := make(map[int64]bool, len(acks))
	for _, a := range acks {
		acked[a.OrderID] = true
		o, ok := byID[a.OrderID]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("order %d (user %s) not found", a.OrderID, a.UserID))
		case o.UserID != a.UserID:
			missing = append(missing, fmt.Sprintf("order %d was acknowledged to %s but belongs to %s", a.OrderID, a.UserID, o.UserID))
		}
	}
	r.Lost = len(missing)
	if len(missing) > 0 {
		r.add(AcknowledgedOrderMissing, "sku %d: %d of %d acknowledged order(s) lost: %s",
			r.SKU.ID, len(missing), len(acks), listed(missing))
	}
	return acked
}

// checkPhantoms finds the orders no client was told about that no
// unanswered request of their buyer explains.
func (r *Report) checkPhantoms(orders []Order, acked map[int64]bool, unsureUsers []string) {
	unsure := map[string]int{}
	for _, u := range unsureUsers {
		unsure[u]++
	}
	var phantoms []string
	unacked := 0
	for _, o := range orders {
		if acked[o.ID] {
			continue
		}
		unacked++
		if unsure[o.UserID] > 0 {
			unsure[o.UserID]--
			continue
		}
		phantoms = append(phantoms, fmt.Sprintf("order %d of %s", o.ID, o.UserID))
	}
	if len(phantoms) > 0 {
		r.add(PhantomOrder, "sku %d: %d order(s) no client was told about and no unanswered request explains (%d unacknowledged, %d unanswered requests): %s",
			r.SKU.ID, len(phantoms), unacked, len(unsureUsers), listed(phantoms))
	}
}
