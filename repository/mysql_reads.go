package repository

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/seckill/seckill/service"
)

// readMembers begins tx with the reads of the members' SKU rows, their
// buyers' holdings and the orders under their idempotency keys, in one
// round trip, and returns the orders found by key.
func (s *MySQL) readMembers(ctx context.Context, tx *connTx, ms []*member) (existing map[service.BuyerKey]service.Order, err error) {
	q, args, keys := readsOf(tx.beginning(), ms)
	rows, err := tx.begin(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if err := scanMembers(rows, ms); err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		if !rows.NextResultSet() {
			return nil, resultSetMissing(rows, "orders by key")
		}
		existing = make(map[service.BuyerKey]service.Order, len(keys))
		for rows.Next() {
			var r orderRow
			if err := rows.Scan(&r.ID, &r.SKUID, &r.UserID, &r.Quantity, &r.IdempotencyKey, &r.CreatedAt, &r.Status, &r.ExpiresAt, &r.SettledAt, &r.Arrival, &r.AllocatedAt); err != nil {
				return nil, err
			}
			existing[service.BuyerKey{UserID: r.UserID, Key: *r.IdempotencyKey}] = r.domain()
		}
	}
	return existing, rows.Err()
}

// readsOf is the multi-statement of readMembers after begin, its
// arguments, and the idempotency keys its last SELECT asks for (none:
// no such SELECT).
func readsOf(begin string, ms []*member) (query string, args []any, keys []service.BuyerKey) {
	var q strings.Builder
	q.WriteString(begin)
	q.WriteString("SELECT id, name, total_stock, stock, sold, version, fence, per_user_limit, starts_at, ends_at, created_at, updated_at, waiters FROM skus WHERE id IN (")
	for i, m := range ms {
		q.WriteString(placeholder(i))
		args = append(args, m.b.SKUID)
	}
	q.WriteString(")")

	q.WriteString("; SELECT sku_id, user_id, quantity, waiting FROM user_purchases WHERE (sku_id, user_id) IN (")
	n := 0
	for _, m := range ms {
		for _, u := range distinctUsers(m.b.Requests) {
			if n > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?)")
			args = append(args, m.b.SKUID, u)
			n++
		}
	}
	q.WriteString(")")

	for _, m := range ms {
		keys = append(keys, idempotencyKeys(m.b.Requests)...)
	}
	if len(keys) > 0 {
		q.WriteString("; SELECT id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at, arrival, allocated_at FROM orders WHERE (user_id, idempotency_key) IN (")
		for i, k := range keys {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?)")
			args = append(args, k.UserID, k.Key)
		}
		q.WriteString(")")
	}
	return q.String(), args, keys
}

// scanMembers reads the SKU rows and the holdings (the first two result
// sets of readsOf's query) into their members. A member whose row is
// missing gets service.ErrSKUNotFound.
func scanMembers(rows *sql.Rows, ms []*member) error {
	bySKU := make(map[int64]*member, len(ms))
	for _, m := range ms {
		m.err = service.ErrSKUNotFound // until its row is read
		m.held = map[string]service.Holding{}
		m.res = service.BatchResult{} // nothing of a decision on the known row stays
		bySKU[m.b.SKUID] = m
	}
	for rows.Next() {
		var r skuRow
		if err := rows.Scan(&r.ID, &r.Name, &r.TotalStock, &r.Stock, &r.Sold, &r.Version, &r.Fence,
			&r.PerUserLimit, &r.StartsAt, &r.EndsAt, &r.CreatedAt, &r.UpdatedAt, &r.Waiters); err != nil {
			return err
		}
		if m := bySKU[r.ID]; m != nil {
			m.sku, m.err = r, nil
		}
	}
	if !rows.NextResultSet() {
		return resultSetMissing(rows, "holdings")
	}
	for rows.Next() {
		var sku, qty, waiting int64
		var u string
		if err := rows.Scan(&sku, &u, &qty, &waiting); err != nil {
			return err
		}
		if m := bySKU[sku]; m != nil {
			m.held[u] = service.Holding{Units: qty, Waiting: waiting > 0}
		}
	}
	return nil
}

func resultSetMissing(rows *sql.Rows, what string) error {
	if err := rows.Err(); err != nil {
		return err
	}
	return fmt.Errorf("repository: %s result set missing (does the DSN allow multiStatements?)", what)
}

func placeholder(i int) string {
	if i == 0 {
		return "?"
	}
	return ", ?"
}
