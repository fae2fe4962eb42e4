package audit

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/service"
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

// checkEvents checks r's SKU's events in tx, when asked to: the orders
// created in the window, and every outbox row that may tell one of them
// (eventRows), expanded and walked in id order by service.CheckChain, as
// the tests walk the whole outbox (internal/testenv/eventcheck). Each order's events must
// be one created, then one per change, each from a status it can leave,
// the last its status now; an order without any is broken.
func (o options) checkEvents(ctx context.Context, tx *sql.Tx, r *Report) error {
	window := o.retention - time.Minute
	if !o.events || window <= 0 {
		return nil
	}
	last := map[int64]service.OrderStatus{}
	current := map[int64]service.OrderStatus{}
	lo, hi := int64(math.MaxInt64), int64(0)
	err := each(ctx, tx, func(rows *sql.Rows) error {
		var id int64
		var status service.OrderStatus
		if err := rows.Scan(&id, &status); err != nil {
			return err
		}
		last[id], current[id] = "", status
		lo, hi = min(lo, id), max(hi, id)
		return nil
	}, "SELECT id, status FROM orders WHERE sku_id = ? AND created_at >= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND", r.SKU, window.Microseconds())
	if err != nil || len(current) == 0 {
		return wrapEvents(r, err)
	}
	runs, err := eventRows(ctx, tx, current, lo, hi)
	if err != nil {
		return wrapEvents(r, err)
	}
	var chain []service.OrderEvent
	for _, run := range runs {
		for k := range run.Len() {
			if e := run.Event(k); e.OrderID >= lo && e.OrderID <= hi {
				if _, ours := current[e.OrderID]; ours {
					chain = append(chain, e)
				}
			}
		}
	}
	bad := map[int64]bool{}
	for _, b := range service.CheckChain(chain, last) {
		bad[b.Event.OrderID] = true
	}
	for id, status := range current {
		if last[id] != status {
			bad[id] = true
		}
	}
	r.EventOrders = int64(len(current))
	if len(bad) > 0 {
		first := slices.Min(slices.Collect(maps.Keys(bad)))
		r.fail(EventsTellChanges, "%d of %d orders of the last %v lack an event of a change, or have one of a change that did not happen, order %d first",
			len(bad), r.EventOrders, window, first)
	}
	return nil
}

// OutboxReport is the outbox audited as a whole (Outbox).
type OutboxReport struct {
	Rows     int64     `json:"rows"`   // outbox rows read
	Events   int64     `json:"events"` // the events they tell
	Failures []Failure `json:"failures"`
}

// OK reports whether every event tells an order that exists.
func (r OutboxReport) OK() bool { return len(r.Failures) == 0 }

// Outbox audits the order events' outbox as a whole, with WithEvents
// (else it reads nothing): every row's events must tell orders that
// exist (EventsHaveOrders): a run's orders are its ids from order_id to
// last_order_id, step apart, each counted in orders by primary key. It
// reads outboxPage rows at a time, each page in its own read-only
// snapshot, so that no snapshot outlives a page during a sale: an event
// is written in its order's transaction, so a page never sees an event
// without its order, whatever committed since the page before. The
// outbox holds what the relay has not published and what it published
// within events.retention: its size follows the last retention's sale.
func Outbox(ctx context.Context, db *sql.DB, opts ...Option) (OutboxReport, error) {
	return outbox(ctx, db, outboxPageRows, opts...)
}

// outbox is Outbox, pageRows rows a snapshot.
func outbox(ctx context.Context, db *sql.DB, pageRows int, opts ...Option) (OutboxReport, error) {
	r := OutboxReport{Failures: []Failure{}}
	if !optionsOf(opts).events {
		return r, nil
	}
	var missing, firstRow, after int64
	for {
		n, err := outboxPage(ctx, db, after, pageRows, func(run service.EventRun, found int64) {
			n := int64(run.Len())
			r.Rows, r.Events = r.Rows+1, r.Events+n
			if found < n {
				missing += n - found
				if firstRow == 0 {
					firstRow = run.ID
				}
			}
			after = run.ID
		})
		if err != nil {
			return r, fmt.Errorf("audit: the order events' outbox: %w", err)
		}
		if n < pageRows {
			break
		}
	}
	if missing > 0 {
		r.Failures = append(r.Failures, Failure{Invariant: EventsHaveOrders, Detail: fmt.Sprintf(
			"%d of %d events tell orders that do not exist, outbox row %d first", missing, r.Events, firstRow)})
	}
	return r, nil
}

// outboxPageRows is the outbox rows one snapshot of Outbox reads.
const outboxPageRows = 10000

// outboxPage reads, in one read-only snapshot, the outbox rows after the
// row after, at most limit, calling row with each run and the number of
// its orders that exist; it returns how many rows it read.
func outboxPage(ctx context.Context, db *sql.DB, after int64, limit int, row func(service.EventRun, int64)) (int, error) {
	tx, err := begin(ctx, db)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() // read only: nothing to keep
	n := 0
	err = each(ctx, tx, func(rows *sql.Rows) error {
		var run service.EventRun
		var found int64
		if err := rows.Scan(&run.ID, &run.First, &run.Last, &run.Step, &found); err != nil {
			return err
		}
		n++
		row(run, found)
		return nil
	}, `SELECT e.id, e.order_id, e.last_order_id, e.step,
		(SELECT COUNT(*) FROM orders o WHERE o.id BETWEEN e.order_id AND e.last_order_id AND MOD(o.id - e.order_id, e.step) = 0)
		FROM order_events e WHERE e.id > ? ORDER BY e.id LIMIT ?`, after, limit)
	if err != nil {
		return n, err
	}
	return n, tx.Commit()
}

// eventsChunk bounds the ids of one IN list.
const eventsChunk = 1000

// eventRows returns, in id order, the outbox rows that may tell an order
// of ours, all of whose ids lie from lo to hi: every created row whose
// first order is at most service.MaxRunSpan ids below lo (migration
// 00007's order_events_created: the rounds', not the orders'), and every
// other row of one of ours (order_events_order). An audit reads its
// SKU's events and the rounds around them, not every SKU's.
func eventRows(ctx context.Context, tx *sql.Tx, ours map[int64]service.OrderStatus, lo, hi int64) ([]service.EventRun, error) {
	byID := map[int64]service.EventRun{}
	scan := func(rows *sql.Rows) error {
		var run service.EventRun
		if err := rows.Scan(&run.ID, &run.EventID, &run.First, &run.Last, &run.Step, &run.Type, &run.Status); err != nil {
			return err
		}
		byID[run.ID] = run
		return nil
	}
	const cols = "SELECT id, event_id, order_id, last_order_id, step, type, status FROM order_events WHERE "
	if err := each(ctx, tx, scan, cols+"type = 'created' AND order_id BETWEEN ? AND ?", lo-service.MaxRunSpan, hi); err != nil {
		return nil, err
	}
	ids := slices.Sorted(maps.Keys(ours))
	for chunk := range slices.Chunk(ids, eventsChunk) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		q := cols + "type <> 'created' AND order_id IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		if err := each(ctx, tx, scan, q, args...); err != nil {
			return nil, err
		}
	}
	runs := slices.Collect(maps.Values(byID))
	slices.SortFunc(runs, func(a, b service.EventRun) int { return cmp.Compare(a.ID, b.ID) })
	return runs, nil
}

// each runs query in tx and calls scan on each row.
func each(ctx context.Context, tx *sql.Tx, scan func(*sql.Rows) error, query string, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func wrapEvents(r *Report, err error) error {
	if err != nil {
		return fmt.Errorf("audit: sku %d: order events: %w", r.SKU, err)
	}
	return nil
}
