// Package audit reconciles a sale in MySQL/MariaDB after the fact: per SKU,
// the skus row against its orders by status, its buyers' holdings and the
// idempotency keys, and reports every invariant the data contradicts.
//
// It only reads, one SKU at a time, each in its own READ ONLY, REPEATABLE
// READ transaction (one consistent snapshot, so a sale running meanwhile
// shows no false alarm), and it aggregates in SQL: its memory does not
// grow with the number of orders, users or SKUs.
package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Invariant names one check; the names are stable (the -json output and
// the exit report use them).
type Invariant string

// The invariants, in the order they are checked and reported.
const (
	// StockNonNegative: stock >= 0.
	StockNonNegative Invariant = "stock_nonnegative"
	// StockAddsUp: stock + sold = total_stock (the initial stock plus restocks).
	StockAddsUp Invariant = "stock_adds_up"
	// OrdersHaveUnits: the live (pending + paid) orders hold no more units
	// than sold; more is an order that took no unit, or a unit that a
	// cancellation or expiry returned twice.
	OrdersHaveUnits Invariant = "orders_have_units"
	// UnitsHaveOrders: every unit sold has a live order.
	UnitsHaveOrders Invariant = "units_have_orders"
	// HoldingsMatchOrders: each buyer's holding (user_purchases) equals the
	// units of their live orders.
	HoldingsMatchOrders Invariant = "holdings_match_orders"
	// NoOrphanHolding: no holding without a live order (a returned unit
	// that kept its buyer's quota).
	NoOrphanHolding Invariant = "no_orphan_holding"
	// WithinLimit: no buyer's live units exceed the SKU's per-user limit,
	// or the larger limit their holding recorded before the limit was
	// lowered (a lowered limit keeps what was bought).
	WithinLimit Invariant = "within_limit"
	// SettledOnce: the status and the settlement times agree: a pending
	// order is unsettled; a cancelled, expired or paid-later order has
	// settled_at; an expired order settled at or after its expires_at, a
	// paid one before it. The status change and the unit's return are one
	// transaction, so this and OrdersHaveUnits show a unit returned twice.
	SettledOnce Invariant = "settled_once"
	// IdempotencyUnique: at most one order per (buyer, idempotency key).
	IdempotencyUnique Invariant = "idempotency_unique"
)

// Invariants lists every invariant, in report order.
var Invariants = []Invariant{StockNonNegative, StockAddsUp, OrdersHaveUnits, UnitsHaveOrders,
	HoldingsMatchOrders, NoOrphanHolding, WithinLimit, SettledOnce, IdempotencyUnique}

// ErrNotFound is returned by SKU for an id with no skus row.
var ErrNotFound = errors.New("audit: sku not found")

// Tally counts orders and their units.
type Tally struct {
	Orders int64 `json:"orders"`
	Units  int64 `json:"units"`
}

// Failure is one invariant a SKU's data contradicts, with the numbers.
type Failure struct {
	Invariant Invariant `json:"invariant"`
	Detail    string    `json:"detail"`
}

// Report is one SKU's reconciliation.
type Report struct {
	SKU          int64 `json:"sku"`
	TotalStock   int64 `json:"total_stock"`
	Stock        int64 `json:"stock"`
	Sold         int64 `json:"sold"`
	Version      int64 `json:"version"`
	PerUserLimit int64 `json:"per_user_limit"`

	Pending   Tally `json:"pending"`
	Paid      Tally `json:"paid"`
	Cancelled Tally `json:"cancelled"`
	Expired   Tally `json:"expired"`

	Buyers    int64 `json:"buyers"`     // users with a live order
	Holders   int64 `json:"holders"`    // user_purchases rows
	HeldUnits int64 `json:"held_units"` // their sum
	Keyed     int64 `json:"keyed"`      // orders with an idempotency key

	Failures []Failure `json:"failures"`
}

// LiveUnits returns the units of the pending and paid orders.
func (r Report) LiveUnits() int64 { return r.Pending.Units + r.Paid.Units }

// OK reports whether every invariant holds.
func (r Report) OK() bool { return len(r.Failures) == 0 }

// Failed returns the names of the failed invariants.
func (r Report) Failed() []Invariant {
	out := make([]Invariant, len(r.Failures))
	for i, f := range r.Failures {
		out[i] = f.Invariant
	}
	return out
}

func (r *Report) fail(inv Invariant, format string, args ...any) {
	r.Failures = append(r.Failures, Failure{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
}

// live is the SQL list of the statuses that hold units; the statuses are
// those migrations/mysql/00003_order_lifecycle.sql allows.
const live = "('pending', 'paid')"

// SKU audits one SKU in its own read-only snapshot. It returns ErrNotFound
// when the SKU does not exist, and the database's error when a query fails
// (a failed invariant is not an error: it is in the Report).
func SKU(ctx context.Context, db *sql.DB, id int64) (Report, error) {
	tx, err := begin(ctx, db)
	if err != nil {
		return Report{}, err
	}
	defer tx.Rollback() // read only: nothing to keep
	r, err := audit(ctx, tx, id)
	if err != nil {
		return Report{}, err
	}
	return r, tx.Commit()
}

// All audits every SKU by id, pageSize ids at a time (0: 500), each in its
// own snapshot, and calls each with its report; an error from each stops
// the walk and is returned. A SKU that disappears mid-walk is skipped.
func All(ctx context.Context, db *sql.DB, pageSize int, each func(Report) error) error {
	if pageSize <= 0 {
		pageSize = 500
	}
	ids := make([]int64, 0, pageSize)
	var after int64
	for {
		ids = ids[:0]
		rows, err := db.QueryContext(ctx, "SELECT id FROM skus WHERE id > ? ORDER BY id LIMIT ?", after, pageSize)
		if err != nil {
			return fmt.Errorf("audit: list skus: %w", err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("audit: list skus: %w", err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("audit: list skus: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("audit: list skus: %w", err)
		}
		for _, id := range ids {
			r, err := SKU(ctx, db, id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if err := each(r); err != nil {
				return err
			}
		}
		if len(ids) < pageSize {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

// begin opens the snapshot: REPEATABLE READ, so every read of the SKU sees
// the database as of the first one, and READ ONLY, which the server
// enforces: the audit cannot write, and a user granted SELECT suffices.
func begin(ctx context.Context, db *sql.DB) (*sql.Tx, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("audit: begin: %w", err)
	}
	return tx, nil
}

func audit(ctx context.Context, tx *sql.Tx, id int64) (Report, error) {
	r := Report{SKU: id, Failures: []Failure{}}
	q := func(what, query string, args []any, dest ...any) error {
		if err := tx.QueryRowContext(ctx, query, args...).Scan(dest...); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return err
			}
			return fmt.Errorf("audit: sku %d: %s: %w", id, what, err)
		}
		return nil
	}

	err := q("skus", "SELECT total_stock, stock, sold, version, per_user_limit FROM skus WHERE id = ?", []any{id},
		&r.TotalStock, &r.Stock, &r.Sold, &r.Version, &r.PerUserLimit)
	if errors.Is(err, sql.ErrNoRows) {
		return Report{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return Report{}, err
	}

	var badSettlement int64
	if err := statuses(ctx, tx, &r, &badSettlement); err != nil {
		return Report{}, err
	}

	// Buyers (users with live orders) against holders (user_purchases
	// rows): both sides scanned once, by the SKU's index and the holdings'
	// primary key, and joined by one GROUP BY user_id on the server. A
	// buyer is over the limit only above both the SKU's limit and the
	// limit their holding recorded.
	var mismatched, orphans, over int64
	if err := q("holdings", `SELECT COALESCE(SUM(units > 0), 0), COALESCE(SUM(holds), 0), COALESCE(SUM(held), 0),
			COALESCE(SUM(units > 0 AND (holds = 0 OR held <> units)), 0),
			COALESCE(SUM(units = 0 AND holds > 0), 0),
			COALESCE(SUM(units > GREATEST(?, lim)), 0)
		FROM (SELECT user_id, SUM(units) AS units, SUM(holds) AS holds, SUM(held) AS held, MAX(lim) AS lim
			FROM (SELECT user_id, quantity AS units, 0 AS holds, 0 AS held, 0 AS lim
				FROM orders WHERE sku_id = ? AND status IN `+live+`
			UNION ALL
			SELECT user_id, 0, 1, quantity, per_user_limit FROM user_purchases WHERE sku_id = ?) x
			GROUP BY user_id) u`,
		[]any{r.PerUserLimit, id, id}, &r.Buyers, &r.Holders, &r.HeldUnits, &mismatched, &orphans, &over); err != nil {
		return Report{}, err
	}

	// An order of this SKU whose (buyer, key) another order, of any SKU,
	// also carries. Both unique keys the schema has had (the key alone;
	// the buyer and the key) index this lookup.
	var dupKeys int64
	if err := q("idempotency keys", `SELECT COUNT(*), COALESCE(SUM(EXISTS (SELECT 1 FROM orders d
				WHERE d.idempotency_key = o.idempotency_key AND d.user_id = o.user_id AND d.id <> o.id)), 0)
		FROM orders o WHERE o.sku_id = ? AND o.idempotency_key IS NOT NULL`,
		[]any{id}, &r.Keyed, &dupKeys); err != nil {
		return Report{}, err
	}

	r.check(breaches{settlement: badSettlement, mismatched: mismatched, orphans: orphans, over: over, dupKeys: dupKeys})
	return r, nil
}

// breaches counts the rows of a SKU that contradict an invariant.
type breaches struct {
	settlement, mismatched, orphans, over, dupKeys int64
}

// check records every invariant the report's figures and b contradict.
func (r *Report) check(b breaches) {
	if r.Stock < 0 {
		r.fail(StockNonNegative, "stock %d", r.Stock)
	}
	if r.Stock+r.Sold != r.TotalStock {
		r.fail(StockAddsUp, "stock %d + sold %d = %d, total_stock %d", r.Stock, r.Sold, r.Stock+r.Sold, r.TotalStock)
	}
	if lu := r.LiveUnits(); lu > r.Sold {
		r.fail(OrdersHaveUnits, "live orders hold %d units (pending %d, paid %d), sold %d: %d without a unit",
			lu, r.Pending.Units, r.Paid.Units, r.Sold, lu-r.Sold)
	} else if lu < r.Sold {
		r.fail(UnitsHaveOrders, "sold %d, live orders hold %d units (pending %d, paid %d): %d without an order",
			r.Sold, lu, r.Pending.Units, r.Paid.Units, r.Sold-lu)
	}
	if b.mismatched > 0 {
		r.fail(HoldingsMatchOrders, "%d of %d buyers hold other than their live orders' units", b.mismatched, r.Buyers)
	}
	if b.orphans > 0 {
		r.fail(NoOrphanHolding, "%d holdings without a live order", b.orphans)
	}
	if b.over > 0 {
		r.fail(WithinLimit, "%d buyers over the per-user limit %d", b.over, r.PerUserLimit)
	}
	if b.settlement > 0 {
		r.fail(SettledOnce, "%d orders whose status and settlement disagree", b.settlement)
	}
	if b.dupKeys > 0 {
		r.fail(IdempotencyUnique, "%d orders share their buyer's idempotency key with another order", b.dupKeys)
	}
}

// statuses tallies the SKU's orders by status and counts those whose
// settlement columns contradict their status (see SettledOnce).
func statuses(ctx context.Context, tx *sql.Tx, r *Report, bad *int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT status, COUNT(*), COALESCE(SUM(quantity), 0),
			COALESCE(SUM(CASE status
				WHEN 'pending'   THEN settled_at IS NOT NULL
				WHEN 'paid'      THEN (expires_at IS NULL) <> (settled_at IS NULL) OR settled_at >= expires_at
				WHEN 'cancelled' THEN settled_at IS NULL OR expires_at IS NULL
				WHEN 'expired'   THEN settled_at IS NULL OR expires_at IS NULL OR settled_at < expires_at
				ELSE 1 END), 0)
		FROM orders WHERE sku_id = ? GROUP BY status`, r.SKU)
	if err != nil {
		return fmt.Errorf("audit: sku %d: orders: %w", r.SKU, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status string
			t      Tally
			b      int64
		)
		if err := rows.Scan(&status, &t.Orders, &t.Units, &b); err != nil {
			return fmt.Errorf("audit: sku %d: orders: %w", r.SKU, err)
		}
		*bad += b
		switch status {
		case "pending":
			r.Pending = t
		case "paid":
			r.Paid = t
		case "cancelled":
			r.Cancelled = t
		case "expired":
			r.Expired = t
		default: // the schema's CHECK refuses it; counted as a bad settlement
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: sku %d: orders: %w", r.SKU, err)
	}
	return nil
}
