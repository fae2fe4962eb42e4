// Package audit reconciles a sale in MySQL/MariaDB after the fact: per SKU,
// the skus row against its orders by status, its buyers' holdings, the
// idempotency keys and the waitlist (docs/design.md, invariant 20), and
// reports every invariant the data contradicts.
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
	// units of their live and waiting orders: a waiting order holds no
	// unit but counts toward its buyer's limit.
	HoldingsMatchOrders Invariant = "holdings_match_orders"
	// NoOrphanHolding: no holding without a live or waiting order (a
	// returned unit that kept its buyer's quota).
	NoOrphanHolding Invariant = "no_orphan_holding"
	// WithinLimit: no buyer's live and waiting units exceed the SKU's
	// per-user limit, or the larger limit their holding recorded before
	// the limit was lowered (a lowered limit keeps what was bought).
	WithinLimit Invariant = "within_limit"
	// SettledOnce: the status and the settlement times agree: a pending or
	// waiting order is unsettled; a cancelled, expired, lapsed or
	// paid-later order has settled_at; a cancelled or expired order had
	// expires_at, but one cancelled while it waited for a sale without an
	// end; an expired order settled at or after its expires_at, a paid one
	// before it; a lapsed order was never given units (allocated_at). The status change and the unit's return
	// are one transaction, so this and OrdersHaveUnits show a unit
	// returned twice.
	SettledOnce Invariant = "settled_once"
	// IdempotencyUnique: at most one order per (buyer, idempotency key).
	IdempotencyUnique Invariant = "idempotency_unique"
	// WaitersCounted: the SKU's row counts its waiting orders
	// (skus.waiters), and each holding's waiting flag is its buyer's
	// waiting orders (0 or 1).
	WaitersCounted Invariant = "waiters_counted"
	// WaitersHoldNothing: no waiting order holds a unit. Its units are not
	// in sold (StockAddsUp and OrdersHaveUnits/UnitsHaveOrders see those);
	// here, no waiting order looks given units: allocated_at or
	// allotted_version set.
	WaitersHoldNothing Invariant = "waiters_hold_nothing"
	// AllottedInOrder: every order given units from the line (its
	// allotted_version set) went before every earlier waiter it could
	// have: no waiter W of the SKU ahead of it by (arrival, id), asking no
	// more units, in line before the allotment (W's joined_version below
	// its allotted_version) and still waiting after it (W waits still, or
	// was given units by a later allotment). The versions are the SKU
	// row's, which every transaction that adds a waiter or gives units
	// locks and bumps: they order those transactions exactly. A waiter
	// that left unserved (cancelled or lapsed) is not judged: the row does
	// not say when it left.
	AllottedInOrder Invariant = "allotted_in_order"
	// NoUnitFreeForAWaiter: while the sale is on (by the database's
	// clock), no waiting order asks for no more than the free stock: the
	// transaction that returns a unit gives it to the line.
	NoUnitFreeForAWaiter Invariant = "no_unit_free_for_a_waiter"
	// EventsTellChanges (WithEvents): each order's events in the outbox,
	// in id order, are one created, then one per change of its status,
	// each from a status it can leave, the last with its status now: a
	// committed change without its event, or an event of a change that
	// did not commit, breaks the chain (events.go).
	EventsTellChanges Invariant = "events_tell_changes"
	// EventsHaveOrders (WithEvents, the outbox as a whole: Outbox): every
	// event in the outbox tells an order that exists. An event of an
	// order that never committed belongs to no SKU, so no SKU's audit
	// sees it (events.go).
	EventsHaveOrders Invariant = "events_have_orders"
)

// Invariants lists every invariant, in report order.
var Invariants = []Invariant{StockNonNegative, StockAddsUp, OrdersHaveUnits, UnitsHaveOrders,
	HoldingsMatchOrders, NoOrphanHolding, WithinLimit, SettledOnce, IdempotencyUnique,
	WaitersCounted, WaitersHoldNothing, AllottedInOrder, NoUnitFreeForAWaiter, EventsTellChanges}

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
	Waiters      int64 `json:"waiters"` // the row's count of waiting orders
	OnSale       bool  `json:"on_sale"` // the sale window is open, by the database's clock

	Pending   Tally `json:"pending"`
	Paid      Tally `json:"paid"`
	Cancelled Tally `json:"cancelled"`
	Expired   Tally `json:"expired"`
	Waiting   Tally `json:"waiting"`
	Lapsed    Tally `json:"lapsed"`
	Allotted  Tally `json:"allotted"` // orders given units from the line, whatever their status now

	Buyers    int64 `json:"buyers"`     // users with a live or waiting order
	Holders   int64 `json:"holders"`    // user_purchases rows
	HeldUnits int64 `json:"held_units"` // their sum
	Keyed     int64 `json:"keyed"`      // orders with an idempotency key
	// EventOrders counts the orders whose events were checked
	// (WithEvents): those of the last events.retention.
	EventOrders int64 `json:"event_orders,omitempty"`

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

// liveOrWaiting is the SQL list of the statuses a buyer's holding counts.
const liveOrWaiting = "('pending', 'paid', 'waiting')"

// SKU audits one SKU in its own read-only snapshot. It returns ErrNotFound
// when the SKU does not exist, and the database's error when a query fails
// (a failed invariant is not an error: it is in the Report).
func SKU(ctx context.Context, db *sql.DB, id int64, opts ...Option) (Report, error) {
	tx, err := begin(ctx, db)
	if err != nil {
		return Report{}, err
	}
	defer tx.Rollback() // read only: nothing to keep
	r, err := audit(ctx, tx, id)
	if err == nil {
		err = optionsOf(opts).checkEvents(ctx, tx, &r)
	}
	if err != nil {
		return Report{}, err
	}
	return r, tx.Commit()
}

// All audits every SKU by id, pageSize ids at a time (0: 500), each in its
// own snapshot, and calls each with its report; an error from each stops
// the walk and is returned. A SKU that disappears mid-walk is skipped.
func All(ctx context.Context, db *sql.DB, pageSize int, each func(Report) error, opts ...Option) error {
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
			r, err := SKU(ctx, db, id, opts...)
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

	// The columns hold UTC (database.OpenMySQL): the window is read by
	// the database's UTC clock, one clock for every instance's sale.
	err := q("skus", `SELECT total_stock, stock, sold, version, per_user_limit, waiters,
			(starts_at IS NULL OR starts_at <= UTC_TIMESTAMP(6)) AND (ends_at IS NULL OR UTC_TIMESTAMP(6) < ends_at)
		FROM skus WHERE id = ?`, []any{id},
		&r.TotalStock, &r.Stock, &r.Sold, &r.Version, &r.PerUserLimit, &r.Waiters, &r.OnSale)
	if errors.Is(err, sql.ErrNoRows) {
		return Report{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return Report{}, err
	}

	var b breaches
	if err := statuses(ctx, tx, &r, &b); err != nil {
		return Report{}, err
	}

	// Buyers (users with live or waiting orders) against holders
	// (user_purchases rows): both sides scanned once, by the SKU's index
	// and the holdings' primary key, and joined by one GROUP BY user_id on
	// the server. A buyer is over the limit only above both the SKU's
	// limit and the limit their holding recorded.
	if err := q("holdings", `SELECT COALESCE(SUM(units > 0), 0), COALESCE(SUM(holds), 0), COALESCE(SUM(held), 0),
			COALESCE(SUM(units > 0 AND (holds = 0 OR held <> units)), 0),
			COALESCE(SUM(units = 0 AND holds > 0), 0),
			COALESCE(SUM(units > GREATEST(?, lim)), 0),
			COALESCE(SUM(holds > 0 AND flag <> waits), 0)
		FROM (SELECT user_id, SUM(units) AS units, SUM(waits) AS waits, SUM(holds) AS holds, SUM(held) AS held,
				SUM(flag) AS flag, MAX(lim) AS lim
			FROM (SELECT user_id, quantity AS units, status = 'waiting' AS waits, 0 AS holds, 0 AS held, 0 AS flag, 0 AS lim
				FROM orders WHERE sku_id = ? AND status IN `+liveOrWaiting+`
			UNION ALL
			SELECT user_id, 0, 0, 1, quantity, waiting, per_user_limit FROM user_purchases WHERE sku_id = ?) x
			GROUP BY user_id) u`,
		[]any{r.PerUserLimit, id, id}, &r.Buyers, &r.Holders, &r.HeldUnits, &b.mismatched, &b.orphans, &b.over, &b.flags); err != nil {
		return Report{}, err
	}

	// An order of this SKU whose (buyer, key) another order, of any SKU,
	// also carries. Both unique keys the schema has had (the key alone;
	// the buyer and the key) index this lookup.
	if err := q("idempotency keys", `SELECT COUNT(*), COALESCE(SUM(EXISTS (SELECT 1 FROM orders d
				WHERE d.idempotency_key = o.idempotency_key AND d.user_id = o.user_id AND d.id <> o.id)), 0)
		FROM orders o WHERE o.sku_id = ? AND o.idempotency_key IS NOT NULL`,
		[]any{id}, &r.Keyed, &b.dupKeys); err != nil {
		return Report{}, err
	}

	if r.Allotted.Orders > 0 {
		if err := q("allotments", allottedOutOfOrder, []any{id, id}, &b.skipped, &b.firstSkipped); err != nil {
			return Report{}, err
		}
	}

	r.check(b)
	return r, nil
}

// allottedOutOfOrder counts the orders a of a SKU given units while an
// earlier waiter w that fit as well was in line (AllottedInOrder), and
// names the first. For each allotment the server walks the SKU's
// orders_waiting index (sku_id, status, arrival, id), filtering in the
// index by arrival from the first waiter's on, and reads only the rows
// of the waiters ahead: the time grows with allotments times orders, the
// memory with neither.
const allottedOutOfOrder = `SELECT COUNT(*), COALESCE(MIN(a.id), 0)
	FROM (SELECT MIN(arrival) AS first FROM orders WHERE sku_id = ? AND joined_version IS NOT NULL) f, orders a
	WHERE a.sku_id = ? AND a.allotted_version IS NOT NULL AND EXISTS (SELECT 1 FROM orders w
		WHERE w.sku_id = a.sku_id AND w.status IN ('waiting', 'pending', 'paid', 'cancelled', 'expired')
			AND w.joined_version IS NOT NULL AND w.arrival >= f.first AND w.arrival <= a.arrival AND (w.arrival < a.arrival OR w.id < a.id)
			AND w.quantity <= a.quantity AND w.joined_version < a.allotted_version
			AND (w.status = 'waiting' OR w.allotted_version > a.allotted_version))`

// breaches counts the rows of a SKU that contradict an invariant.
type breaches struct {
	settlement, mismatched, orphans, over, dupKeys int64
	flags                                          int64 // holdings whose waiting flag is not their buyer's waiting orders
	holding, firstHolding                          int64 // waiting orders that look given units, the first's id
	skipped, firstSkipped                          int64 // allotments out of the line's order, the first's id
	fitting                                        int64 // waiting orders the free stock fits
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
	if r.Waiters != r.Waiting.Orders || b.flags > 0 {
		r.fail(WaitersCounted, "the sku counts %d waiters, %d orders wait; %d holdings' waiting flag is not their buyer's waiting orders",
			r.Waiters, r.Waiting.Orders, b.flags)
	}
	if b.holding > 0 {
		r.fail(WaitersHoldNothing, "%d waiting orders look given units (allocated_at or allotted_version set), order %d first",
			b.holding, b.firstHolding)
	}
	if b.skipped > 0 {
		r.fail(AllottedInOrder, "%d orders given units while an earlier waiter that fit waited on, order %d first",
			b.skipped, b.firstSkipped)
	}
	if r.OnSale && b.fitting > 0 {
		r.fail(NoUnitFreeForAWaiter, "%d units free on sale while %d waiting orders fit them", r.Stock, b.fitting)
	}
}

// statuses tallies the SKU's orders by status and those given units from
// the line, and counts into b those whose settlement columns contradict
// their status (see SettledOnce), the waiting ones that look given units
// and those the free stock fits.
func statuses(ctx context.Context, tx *sql.Tx, r *Report, b *breaches) error {
	rows, err := tx.QueryContext(ctx, `SELECT status, COUNT(*), COALESCE(SUM(quantity), 0),
			COALESCE(SUM(CASE status
				WHEN 'pending'   THEN settled_at IS NOT NULL
				WHEN 'paid'      THEN (expires_at IS NULL) <> (settled_at IS NULL) OR settled_at >= expires_at
				WHEN 'cancelled' THEN settled_at IS NULL OR expires_at IS NULL AND (joined_version IS NULL OR allotted_version IS NOT NULL)
				WHEN 'expired'   THEN settled_at IS NULL OR expires_at IS NULL OR settled_at < expires_at
				WHEN 'waiting'   THEN settled_at IS NOT NULL
				WHEN 'lapsed'    THEN settled_at IS NULL OR allocated_at IS NOT NULL
				ELSE 1 END), 0),
			COUNT(allotted_version), COALESCE(SUM(CASE WHEN allotted_version IS NOT NULL THEN quantity END), 0),
			COALESCE(SUM(status = 'waiting' AND (allocated_at IS NOT NULL OR allotted_version IS NOT NULL)), 0),
			COALESCE(MIN(CASE WHEN status = 'waiting' AND (allocated_at IS NOT NULL OR allotted_version IS NOT NULL) THEN id END), 0),
			COALESCE(SUM(status = 'waiting' AND quantity <= ?), 0)
		FROM orders WHERE sku_id = ? GROUP BY status`, r.Stock, r.SKU)
	if err != nil {
		return fmt.Errorf("audit: sku %d: orders: %w", r.SKU, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status         string
			t, allotted    Tally
			bad, holding   int64
			first, fitting int64
		)
		if err := rows.Scan(&status, &t.Orders, &t.Units, &bad, &allotted.Orders, &allotted.Units, &holding, &first, &fitting); err != nil {
			return fmt.Errorf("audit: sku %d: orders: %w", r.SKU, err)
		}
		b.settlement += bad
		b.holding += holding
		b.fitting += fitting
		if first > 0 {
			b.firstHolding = first // only the waiting orders' group has one
		}
		r.Allotted.Orders += allotted.Orders
		r.Allotted.Units += allotted.Units
		switch status {
		case "pending":
			r.Pending = t
		case "paid":
			r.Paid = t
		case "cancelled":
			r.Cancelled = t
		case "expired":
			r.Expired = t
		case "waiting":
			r.Waiting = t
		case "lapsed":
			r.Lapsed = t
		default: // the schema's CHECK refuses it; counted as a bad settlement
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: sku %d: orders: %w", r.SKU, err)
	}
	return nil
}
