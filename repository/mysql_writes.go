package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/mysqlerr"
	"github.com/seckill/seckill/service"
)

// writes is one multi-statement of a round's writes: a conditional UPDATE
// of every SKU, the orders' INSERT and the holdings' upsert, then, with
// events, the orders' events: a row per run of them created alike. The holdings' upsert leaves
// LAST_INSERT_ID() as the orders' INSERT set it: user_purchases has no
// AUTO_INCREMENT column.
type writes struct {
	q       strings.Builder
	args    []any
	orders  int // rows of the orders' INSERT
	holders int // rows of the holdings' upsert
	// onServer guards each known row's UPDATE with the server that
	// committed it (Batch.KnownOn): after a failover the promoted
	// server's row may have the same version and other contents.
	onServer bool
	// events appends the new orders' events (createdEvents, WithEvents),
	// a row per run of runs.
	events bool
	runs   []createdRun
}

// add appends the writes of the decided members ws.
func (w *writes) add(ws []*member) {
	w.updateSKUs(ws)
	w.insertOrders(ws)
	w.upsertHoldings(ws)
}

// updateSKUs decrements every SKU (and counts its new waiters) in one
// conditional UPDATE, each SKU's
// guard (stock, version, fence) one disjunct of the WHERE, so rows
// affected tell whether every guard held.
func (w *writes) updateSKUs(ws []*member) {
	caseOf := func(col string, val func(*member) any) {
		w.q.WriteString(col + " CASE id")
		for _, m := range ws {
			w.q.WriteString(" WHEN ? THEN ?")
			w.args = append(w.args, m.sku.ID, val(m))
		}
		w.q.WriteString(" END")
	}
	w.q.WriteString("UPDATE skus SET ")
	caseOf("stock = stock -", func(m *member) any { return m.alloc.Units })
	w.q.WriteString(", ")
	caseOf("sold = sold +", func(m *member) any { return m.alloc.Units })
	waiters := false
	for _, m := range ws {
		waiters = waiters || m.alloc.Waiters > 0
	}
	if waiters { // the first act's statement stays as it was
		w.q.WriteString(", ")
		caseOf("waiters = waiters +", func(m *member) any { return m.alloc.Waiters })
	}
	w.q.WriteString(", version = version + 1, updated_at = ?")
	w.args = append(w.args, ws[0].b.Now)
	fenced := false
	for _, m := range ws {
		fenced = fenced || m.b.Fence > 0
	}
	if fenced {
		w.q.WriteString(", fence = CASE id")
		for _, m := range ws {
			if m.b.Fence > 0 {
				w.q.WriteString(" WHEN ? THEN ?")
				w.args = append(w.args, m.sku.ID, m.b.Fence)
			}
		}
		w.q.WriteString(" ELSE fence END")
	}
	w.q.WriteString(" WHERE ")
	for i, m := range ws {
		if i > 0 {
			w.q.WriteString(" OR ")
		}
		w.q.WriteString("(id = ? AND stock >= ? AND version = ?")
		w.args = append(w.args, m.sku.ID, m.alloc.Units, m.sku.Version)
		if m.b.Fence > 0 {
			w.q.WriteString(" AND " + fenceGuard)
			w.args = append(w.args, m.b.Fence, service.FenceCeiling(m.b.Fence))
		}
		if w.onServer {
			w.q.WriteString(" AND @@server_id = ?")
			w.args = append(w.args, m.b.KnownOn)
		}
		w.q.WriteString(")")
	}
}

// insertOrders inserts the members' new orders in one multi-row INSERT.
func (w *writes) insertOrders(ws []*member) {
	w.q.WriteString("; INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, arrival, joined_version) VALUES ")
	for _, m := range ws {
		for _, i := range m.alloc.New {
			o := m.alloc.Outcomes[i].Placed.Order
			if w.orders > 0 {
				w.q.WriteString(", ")
			}
			w.orders++
			w.q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			if w.events {
				w.runs = addCreated(w.runs, o.Status, o.CreatedAt, w.orders-1)
			}
			var key any
			if o.IdempotencyKey != "" {
				key = o.IdempotencyKey
			}
			w.args = append(w.args, o.SKUID, o.UserID, o.Quantity, key, o.CreatedAt, string(o.Status), o.ExpiresAt, arrivalOf(o), joinedVersion(o, m.sku))
		}
	}
}

// upsertHoldings adds each new buyer's units in arrival order, a
// deterministic lock order, and marks those who now wait. Deltas, not
// totals: the CHECKs see the true holding whatever was read.
func (w *writes) upsertHoldings(ws []*member) {
	w.q.WriteString("; INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit, waiting) VALUES ")
	for _, m := range ws {
		waits := m.newWaiters()
		for _, i := range m.alloc.New {
			u := m.alloc.Outcomes[i].Placed.Order.UserID
			after, ok := m.alloc.Bought[u]
			if !ok {
				continue
			}
			delete(m.alloc.Bought, u)
			if w.holders > 0 {
				w.q.WriteString(", ")
			}
			w.holders++
			w.q.WriteString("(?, ?, ?, ?, ?)")
			w.args = append(w.args, m.sku.ID, u, after-m.held[u].Units, m.sku.PerUserLimit, waitingFlag(waits[u]))
		}
	}
	w.q.WriteString(" ON DUPLICATE KEY UPDATE quantity = quantity + VALUES(quantity), waiting = waiting + VALUES(waiting)")
}

// waitingFlag is the waiting column's delta of a buyer who now waits.
func waitingFlag(waits bool) int64 {
	if waits {
		return 1
	}
	return 0
}

// writeAnswers is what the server answered to a round's writes.
type writeAnswers struct {
	updated  int64 // SKU rows the UPDATE changed
	holdings int64 // rows affected by the holdings' upsert
	firstID  int64 // the id of the first order inserted
	step     int64 // auto_increment_increment: the step between order ids
}

// send runs w with exec (tx.beginExec when w begins the transaction) and
// returns each statement's answer, sparing SELECTs of rows affected and
// ids.
func (w *writes) send(ctx context.Context, tx *connTx, exec func(context.Context, string, ...any) (mysql.Result, error)) (writeAnswers, error) {
	ans := writeAnswers{step: 1}
	if w.orders > 1 {
		var err error
		if ans.step, err = tx.autoIncrementStep(ctx); err != nil {
			return ans, err
		}
	}
	eventRows := 0
	if w.events {
		q, args, n := createdEvents(w.runs, ans.step)
		w.q.WriteString(q)
		w.args, eventRows = append(w.args, args...), n
	}
	res, err := exec(ctx, w.q.String(), w.args...)
	if err != nil {
		return ans, err
	}
	// The last three answers are the UPDATE's, the orders' and the
	// holdings', then the events'.
	affected, ids := res.AllRowsAffected(), res.AllLastInsertIds()
	tail := 3
	if w.events {
		tail++
	}
	if len(affected) < tail || len(ids) != len(affected) {
		return ans, fmt.Errorf("repository: %d answers to the writes (does the DSN allow multiStatements?)", len(affected))
	}
	last := len(affected) - 1
	if w.events {
		if err := eventsAnswer(affected[last], eventRows); err != nil {
			return ans, err
		}
		last--
	}
	ans.updated, ans.firstID, ans.holdings = affected[last-2], ids[last-1], affected[last]
	return ans, nil
}

// numberOrders gives the new orders of ws their ids: InnoDB gives one
// multi-row INSERT consecutive ids, auto_increment_increment apart, as
// GORM also assumes.
func (ans writeAnswers) numberOrders(ws []*member) {
	id := ans.firstID
	for _, m := range ws {
		for _, i := range m.alloc.New {
			m.alloc.Outcomes[i].Placed.Order.ID = id
			id += ans.step
		}
	}
}

// knownChanged wraps as errKnownChanged a refusal showing a known row
// changed: a used idempotency key (duplicate entry) or a holding over the
// limit (CHECK, or past its column's range). Other errors stand.
func knownChanged(err error) error {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case mysqlerr.DuplicateEntry, mysqlerr.ConstraintFailed, mysqlerr.CheckViolated, mysqlerr.OutOfRange:
			return fmt.Errorf("%w: %w", errKnownChanged, err)
		}
	}
	return err
}
