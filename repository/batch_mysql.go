package repository

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/seckill/seckill/service"
)

// commitMySQL is CommitBatch on MySQL/MariaDB in four round trips,
// whatever the batch size: BEGIN; the reads (SKU, holdings, earlier orders
// of the batch's idempotency keys) as one multi-statement; the writes
// (conditional UPDATE, its ROW_COUNT, the orders, their first id, the
// holdings) as another; COMMIT. Under load every round trip also waits for
// the Go scheduler, so round trips, not statements, set the batch time.
func (s *Stock) commitMySQL(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return service.BatchResult{}, err
	}
	defer tx.Rollback() // a no-op after Commit

	sku, bought, existing, err := s.readBatch(ctx, tx, b)
	if err != nil {
		return service.BatchResult{}, err
	}
	a := service.Allocate(sku.domain(), b.Requests, existing, bought, b.Now)
	res := service.BatchResult{Stock: sku.Stock, Version: sku.Version}
	if a.Units > 0 {
		if err := s.writeBatch(ctx, tx, b, sku, &a, bought); err != nil {
			return service.BatchResult{}, err
		}
		res.Stock -= a.Units
		res.Version++
	}
	if err := tx.Commit(); err != nil {
		return service.BatchResult{}, err
	}
	a.Resolve()
	res.Outcomes = a.Outcomes
	return res, nil
}

func (s *Stock) readBatch(ctx context.Context, tx *sql.Tx, b service.Batch) (skuRow, map[string]int64, map[string]service.Order, error) {
	var (
		q    strings.Builder
		args []any
		sku  skuRow
	)
	q.WriteString("SELECT id, name, total_stock, stock, sold, version, fence, per_user_limit, starts_at, ends_at, created_at, updated_at FROM skus WHERE id = ?")
	if b.Mode == service.ModePessimistic {
		q.WriteString(" FOR UPDATE")
	}
	args = append(args, b.SKUID)

	users := distinctUsers(b.Requests)
	q.WriteString("; SELECT user_id, quantity FROM user_purchases WHERE sku_id = ? AND user_id IN (")
	args = append(args, b.SKUID)
	for i, u := range users {
		q.WriteString(placeholder(i))
		args = append(args, u)
	}
	q.WriteString(")")

	keys := idempotencyKeys(b.Requests)
	if len(keys) > 0 {
		q.WriteString("; SELECT id, sku_id, user_id, quantity, idempotency_key, created_at FROM orders WHERE idempotency_key IN (")
		for i, k := range keys {
			q.WriteString(placeholder(i))
			args = append(args, k)
		}
		q.WriteString(")")
	}

	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return sku, nil, nil, err
	}
	defer rows.Close()

	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(&sku.ID, &sku.Name, &sku.TotalStock, &sku.Stock, &sku.Sold, &sku.Version, &sku.Fence,
			&sku.PerUserLimit, &sku.StartsAt, &sku.EndsAt, &sku.CreatedAt, &sku.UpdatedAt); err != nil {
			return sku, nil, nil, err
		}
	}
	if !found {
		if err := rows.Err(); err != nil {
			return sku, nil, nil, err
		}
		return sku, nil, nil, service.ErrSKUNotFound
	}

	bought := make(map[string]int64, len(users))
	if !rows.NextResultSet() {
		return sku, nil, nil, resultSetMissing(rows, "holdings")
	}
	for rows.Next() {
		var u string
		var n int64
		if err := rows.Scan(&u, &n); err != nil {
			return sku, nil, nil, err
		}
		bought[u] = n
	}

	var existing map[string]service.Order
	if len(keys) > 0 {
		if !rows.NextResultSet() {
			return sku, nil, nil, resultSetMissing(rows, "orders by key")
		}
		existing = make(map[string]service.Order, len(keys))
		for rows.Next() {
			var r orderRow
			if err := rows.Scan(&r.ID, &r.SKUID, &r.UserID, &r.Quantity, &r.IdempotencyKey, &r.CreatedAt); err != nil {
				return sku, nil, nil, err
			}
			existing[*r.IdempotencyKey] = r.domain()
		}
	}
	return sku, bought, existing, rows.Err()
}

func (s *Stock) writeBatch(ctx context.Context, tx *sql.Tx, b service.Batch, sku skuRow, a *service.Allocation, before map[string]int64) error {
	var (
		q    strings.Builder
		args []any
	)
	q.WriteString("UPDATE skus SET stock = stock - ?, sold = sold + ?, version = version + 1, updated_at = ?")
	args = append(args, a.Units, a.Units, b.Now)
	if b.Fence > 0 {
		q.WriteString(", fence = ?")
		args = append(args, b.Fence)
	}
	q.WriteString(" WHERE id = ? AND stock >= ?")
	args = append(args, sku.ID, a.Units)
	if b.Mode != service.ModeConditional {
		q.WriteString(" AND version = ?")
		args = append(args, sku.Version)
	}
	if b.Fence > 0 {
		q.WriteString(" AND fence < ?")
		args = append(args, b.Fence)
	}
	q.WriteString("; SELECT ROW_COUNT()")

	q.WriteString("; INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at) VALUES ")
	for k, i := range a.New {
		o := a.Outcomes[i].Placed.Order
		if k > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?)")
		var key any
		if o.IdempotencyKey != "" {
			key = o.IdempotencyKey
		}
		args = append(args, o.SKUID, o.UserID, o.Quantity, key, o.CreatedAt)
	}
	q.WriteString("; SELECT LAST_INSERT_ID(), @@auto_increment_increment")

	q.WriteString("; INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES ")
	first := true
	for _, i := range a.New { // arrival order: a deterministic lock order
		u := a.Outcomes[i].Placed.Order.UserID
		n, ok := a.Bought[u]
		if !ok {
			continue
		}
		delete(a.Bought, u)
		if !first {
			q.WriteString(", ")
		}
		first = false
		q.WriteString("(?, ?, ?, ?)")
		args = append(args, sku.ID, u, n-before[u], sku.PerUserLimit)
	}
	// Deltas, not totals: without the version guard (ModeConditional) the
	// CHECK constraint still sees the true holding.
	q.WriteString(" ON DUPLICATE KEY UPDATE quantity = quantity + VALUES(quantity)")

	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var updated int64
	if !rows.Next() {
		return resultSetMissing(rows, "ROW_COUNT")
	}
	if err := rows.Scan(&updated); err != nil {
		return err
	}
	if updated != 1 {
		return service.ErrConflict
	}
	if !rows.NextResultSet() || !rows.Next() {
		return resultSetMissing(rows, "LAST_INSERT_ID")
	}
	var firstID, step int64
	if err := rows.Scan(&firstID, &step); err != nil {
		return err
	}
	// One multi-row INSERT is a "simple insert": InnoDB gives it
	// consecutive ids (steps of auto_increment_increment), as GORM also
	// assumes for its batch inserts.
	for k, i := range a.New {
		a.Outcomes[i].Placed.Order.ID = firstID + int64(k)*step
	}
	for rows.NextResultSet() { // drain, surfacing a failed upsert
	}
	return rows.Err()
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

func distinctUsers(reqs []service.OrderRequest) []string {
	seen := make(map[string]bool, len(reqs))
	users := make([]string, 0, len(reqs))
	for _, r := range reqs {
		if !seen[r.UserID] {
			seen[r.UserID] = true
			users = append(users, r.UserID)
		}
	}
	return users
}

func idempotencyKeys(reqs []service.OrderRequest) []string {
	var keys []string
	for _, r := range reqs {
		if r.IdempotencyKey != "" {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	return keys
}
