package harness

import (
	"context"
	"net/http"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// cancelUnknown is what lifecycle.js says of an order whose cancel got no
// answer or a 503.
const cancelUnknown = "cancel-unanswered"

// expirySlack is how long after a settled_at or allocated_at (read before
// its transaction commits) the change is taken to have committed.
const expirySlack = time.Second

// checkLifecycle waits until no order is pending, then runs the sale's
// checks (checkScript) and the lifecycle's own: every unit paid, every
// answer what the order is, returned units sold again.
func (r *run) checkLifecycle(ctx context.Context, res *ScenarioResult, k6res k6Result, units int64) error {
	if err := r.awaitCount(ctx, "no order pending", time.Minute, func(n int64) bool { return n == 0 },
		"SELECT COUNT(*) FROM orders WHERE status = 'pending'"); err != nil {
		res.bad("%v", err)
	}
	rec, err := readConsole(k6res.Console, r.orderIDs, &restockLog{}) // its restocks: none
	if err != nil {
		return err
	}
	snap, err := verify.FromDB(ctx, r.db, r.skuID)
	if err != nil {
		return err
	}
	r.addReturns(res, rec, snap.Orders)
	res.line("  answers: %d orders created; payments %d paid, %d order_expired; %d cancelled, %d cancels unanswered; stale-fence sweeps refused: %d",
		rec.told["pending"], rec.told["paid"], rec.told["expired"], rec.told["cancelled"], rec.told[cancelUnknown], r.metricSum(ctx, `seckill_sweep_seconds_count{outcome="stale_fence"} `))
	r.checkSaid(res, rec, snap.ByID())
	r.checkResold(res, snap.Orders, units)
	return r.checkScript(ctx, res, k6res, units)
}

// addReturns gives the history the orders' returns: a cancel's within its
// interval (by the history's end when unanswered), then databaseOps.
func (r *run) addReturns(res *ScenarioResult, rec consoleLog, orders []verify.Order) {
	end := time.Now() // after every answer and every sweep
	cancelled := map[int64]bool{}
	for _, c := range rec.cancels {
		if c.OrderID, _ = r.orderIDs.Decode(c.Key); c.Status != http.StatusOK {
			c.Return = end
		}
		c.Key, cancelled[c.OrderID] = "", true
		r.restocks.ops = append(r.restocks.ops, c)
	}
	for _, o := range orders {
		switch {
		case o.Status == "cancelled" && !cancelled[o.ID]:
			res.bad("order %d is cancelled, yet no cancel of it was sent", o.ID)
		case o.Status == "expired" && o.SettledAt == nil:
			res.bad("order %d expired without settled_at", o.ID)
		}
	}
	r.restocks.ops = append(r.restocks.ops, databaseOps(orders)...)
}

// databaseOps is what the database did beside the answers: the expiries,
// the allotments and the lapses, each within expirySlack of the time its
// transaction recorded.
func databaseOps(orders []verify.Order) []verify.Op {
	var ops []verify.Op
	for _, o := range orders {
		add := func(kind string, at *time.Time) {
			if at != nil {
				ops = append(ops, verify.Op{Kind: kind, User: o.UserID, Qty: o.Quantity, OrderID: o.ID,
					Instance: "database", Call: *at, Return: at.Add(expirySlack)})
			}
		}
		if o.Waited {
			add(verify.Allotted, o.AllocatedAt)
		}
		switch {
		case o.Status == "expired":
			add(verify.Returned, o.SettledAt)
		case o.Status == "lapsed" || (o.Status == "cancelled" && o.Waited && o.AllocatedAt == nil):
			add(verify.Left, o.SettledAt)
		}
	}
	return ops
}

// checkSaid holds every order to what its buyer was last told.
func (r *run) checkSaid(res *ScenarioResult, rec consoleLog, orders map[int64]verify.Order) {
	for id, said := range rec.said {
		internal, ok := r.orderIDs.Decode(id)
		if !ok {
			res.bad("order id %q does not decode", id)
			continue
		}
		got := orders[internal].Status
		// An order left pending by its buyer (abandoned) is expired now;
		// one whose cancel got no answer is cancelled or expired.
		if (said == "pending" || said == cancelUnknown) && got == "expired" || said == cancelUnknown && got == "cancelled" {
			continue
		}
		if got != said {
			res.bad("order %d: the client was told %s; the database says %s", internal, said, got)
		}
	}
}

// checkResold requires every unit paid, and paid orders created after the
// first expiry: the returned units were sold again.
func (r *run) checkResold(res *ScenarioResult, orders []verify.Order, units int64) {
	var firstExpiry time.Time
	for _, o := range orders {
		if o.Status == "expired" && o.SettledAt != nil && (firstExpiry.IsZero() || o.SettledAt.Before(firstExpiry)) {
			firstExpiry = *o.SettledAt
		}
	}
	var paid, resold int64
	for _, o := range orders {
		if o.Status == "paid" {
			paid += o.Quantity
			if !firstExpiry.IsZero() && o.CreatedAt.After(firstExpiry) {
				resold++
			}
		}
	}
	res.line("  %d units paid; %d paid orders were created after the first expiry (returned units resold)", paid, resold)
	if paid != units {
		res.bad("%d units paid; want %d", paid, units)
	}
	if firstExpiry.IsZero() || resold == 0 {
		res.bad("%d paid orders created after the first expiry (none expired: %t): returned units were not resold", resold, firstExpiry.IsZero())
	}
}
