package audit

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Option adds a check to SKU and All.
type Option func(*options)

type options struct {
	events    bool
	retention time.Duration
}

func optionsOf(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithEvents checks the order events (EventsTellChanges) of a service run
// with events.enabled, whose relay deletes a published event retention
// after: the orders created in the last retention, less a minute for the
// clocks, whose events cannot have been deleted yet (none with a
// retention of a minute or less).
func WithEvents(retention time.Duration) Option {
	return func(o *options) { o.events, o.retention = true, retention }
}

// eventChains counts a SKU's orders created since a point and those whose
// chain of events is broken, and names the first: testenv.CheckEvents in
// SQL. The inner query numbers each order's events (order_events'
// order_id index) and pairs each with the status before it; an order
// without any is one row of NULLs, broken.
const eventChains = `SELECT COUNT(DISTINCT id), COUNT(DISTINCT CASE WHEN bad THEN id END), COALESCE(MIN(CASE WHEN bad THEN id END), 0)
	FROM (SELECT id, eid IS NULL OR newest = 1 AND status <> current OR NOT (
			type = 'created' AND prev = '' AND status IN ('pending', 'paid', 'waiting')
			OR type = 'paid' AND prev = 'pending' AND status = 'paid'
			OR type = 'cancelled' AND prev IN ('pending', 'waiting') AND status = 'cancelled'
			OR type = 'expired' AND prev = 'pending' AND status = 'expired'
			OR type = 'allocated' AND prev = 'waiting' AND status IN ('pending', 'paid')
			OR type = 'lapsed' AND prev = 'waiting' AND status = 'lapsed') AS bad
		FROM (SELECT o.id, o.status AS current, e.id AS eid, e.type, e.status,
				COALESCE(LAG(e.status) OVER (PARTITION BY o.id ORDER BY e.id), '') AS prev,
				ROW_NUMBER() OVER (PARTITION BY o.id ORDER BY e.id DESC) AS newest
			FROM orders o LEFT JOIN order_events e ON e.order_id = o.id
			WHERE o.sku_id = ? AND o.created_at >= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND) w) c`

// checkEvents checks r's SKU's events in tx, when asked to.
func (o options) checkEvents(ctx context.Context, tx *sql.Tx, r *Report) error {
	window := o.retention - time.Minute
	if !o.events || window <= 0 {
		return nil
	}
	var broken, first int64
	if err := tx.QueryRowContext(ctx, eventChains, r.SKU, window.Microseconds()).Scan(&r.EventOrders, &broken, &first); err != nil {
		return fmt.Errorf("audit: sku %d: order events: %w", r.SKU, err)
	}
	if broken > 0 {
		r.fail(EventsTellChanges, "%d of %d orders of the last %v lack an event of a change, or have one of a change that did not happen, order %d first",
			broken, r.EventOrders, window, first)
	}
	return nil
}
