package harness

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// waitSettled waits until no order is pending: the last abandoned ones
// expire within the window plus a sweep.
func (lr *lifecycleRun) waitSettled(ctx context.Context) error {
	return poll(ctx, "every order settled", time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		var n int64
		if err := lr.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE status = 'pending'").Scan(&n); err != nil || n > 0 {
			return fmt.Errorf("%d orders still pending (%v)", n, err)
		}
		return nil
	})
}

// lifecycleCheck is what verify collects.
type lifecycleCheck struct {
	res    *LifecycleResult
	status map[int64]string // order id → status, from the database
}

func (c *lifecycleCheck) bad(format string, args ...any) {
	c.res.Violations = append(c.res.Violations, fmt.Sprintf(format, args...))
}

// verify reads the database: every unit paid, none pending, the stock adds
// up, holdings agree with the live orders, and every answer a client was
// given is what the order is.
func (lr *lifecycleRun) verify(ctx context.Context, res *LifecycleResult) {
	c := &lifecycleCheck{res: res, status: map[int64]string{}}
	res.Units = lr.units
	answered := lr.answers(c)
	if !lr.readSale(ctx, c) {
		return
	}
	if res.PaidSum != lr.units || res.Sold != lr.units || res.Stock != 0 || res.Total != lr.units {
		c.bad("paid units %d, sold %d, stock %d, total %d; want %d paid and sold, none left", res.PaidSum, res.Sold, res.Stock, res.Total, lr.units)
	}
	if res.Stock+res.Sold != res.Total || res.Sold != res.PaidSum+res.PendingUnits {
		c.bad("stock %d + sold %d != total %d, or sold != paid %d + pending %d", res.Stock, res.Sold, res.Total, res.PaidSum, res.PendingUnits)
	}
	if int64(len(c.status)) != res.Created {
		c.bad("%d orders in the database; %d created answers", len(c.status), res.Created)
	}
	lr.checkAnswers(c, answered)
	lr.checkHoldings(ctx, c)
	res.Violations = append(res.Violations, lr.audit(ctx)...)
	for _, i := range *lr.live.Load() {
		mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, _, _ := lr.metric(mctx, i, `seckill_sweep_seconds_count{outcome="stale_fence"} `)
		cancel()
		res.StaleSweeps += int64(v)
	}
}

// answers copies the clients' counts into the result, lists the
// violations the buyers saw, and returns what each order was last said to be.
func (lr *lifecycleRun) answers(c *lifecycleCheck) map[string]string {
	lr.mu.Lock()
	c.res.Created, c.res.PaidAnswers, c.res.RefusedAnswers, c.res.CancelAnswers = lr.created, lr.paidN, lr.refused, lr.cancelled
	answered := lr.answered
	lr.mu.Unlock()
	lr.run.mu.Lock()
	defer lr.run.mu.Unlock()
	for _, e := range lr.events {
		if v, ok := strings.CutPrefix(e.What, "VIOLATION: "); ok {
			c.bad("%s", v)
		}
	}
	return answered
}

// readSale reads the SKU and its orders into the result; false if it
// could not.
func (lr *lifecycleRun) readSale(ctx context.Context, c *lifecycleCheck) bool {
	res := c.res
	if err := lr.db.QueryRowContext(ctx, "SELECT stock, sold, total_stock FROM skus WHERE id = ?", lr.skuID).Scan(&res.Stock, &res.Sold, &res.Total); err != nil {
		c.bad("read sku: %v", err)
		return false
	}
	res.Orders = map[string]int64{}
	rows, err := lr.db.QueryContext(ctx, "SELECT id, status, quantity FROM orders WHERE sku_id = ?", lr.skuID)
	if err != nil {
		c.bad("read orders: %v", err)
		return false
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, qty int64
			st      string
		)
		if err := rows.Scan(&id, &st, &qty); err != nil {
			c.bad("scan: %v", err)
			break
		}
		c.status[id] = st
		res.Orders[st]++
		switch st {
		case "paid":
			res.PaidSum += qty
		case "pending":
			res.PendingUnits += qty
		}
	}
	return true
}

// checkAnswers holds every order to what its buyer was last told.
func (lr *lifecycleRun) checkAnswers(c *lifecycleCheck, answered map[string]string) {
	for id, said := range answered {
		internal, ok := lr.orderIDs.Decode(id)
		if !ok {
			c.bad("order id %q does not decode", id)
			continue
		}
		got := c.status[internal]
		// An order left pending by its buyer (abandoned) is expired now;
		// one whose cancel got no answer is cancelled or expired.
		if (said == "pending" || said == cancelUnknown) && got == "expired" || said == cancelUnknown && got == "cancelled" {
			continue
		}
		if got != said {
			c.bad("order %d: the client was told %s; the database says %s", internal, said, got)
		}
	}
}

// checkHoldings checks user_purchases against the live orders, the
// per-user limit, and that returned units were sold again.
func (lr *lifecycleRun) checkHoldings(ctx context.Context, c *lifecycleCheck) {
	db, sku, res := lr.db, lr.skuID, c.res
	var held, live, over int64
	_ = db.QueryRowContext(ctx, "SELECT COALESCE(SUM(quantity), 0) FROM user_purchases WHERE sku_id = ?", sku).Scan(&held)
	_ = db.QueryRowContext(ctx, "SELECT COALESCE(SUM(quantity), 0) FROM orders WHERE sku_id = ? AND status IN ('pending', 'paid')", sku).Scan(&live)
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE sku_id = ? AND status IN ('pending', 'paid')
		GROUP BY user_id HAVING SUM(quantity) > 1) x`, sku).Scan(&over)
	if held != live || over != 0 {
		c.bad("holdings %d units, live orders %d, users over the limit %d", held, live, over)
	}
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders WHERE sku_id = ? AND status = 'paid' AND created_at >
		(SELECT MIN(settled_at) FROM orders WHERE sku_id = ? AND status = 'expired')`, sku, sku).Scan(&res.ResoldAfterExpiry)
	if res.Orders["expired"] == 0 || res.ResoldAfterExpiry == 0 {
		c.bad("%d orders expired, %d paid orders created after the first expiry: returned units were not resold", res.Orders["expired"], res.ResoldAfterExpiry)
	}
}
