package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/seckill/seckill/service"
)

// positionQuery reads where a session's commits and reads stand: the
// server's id and its binary log position. Read after COMMIT, or beside a
// read in the same statement, on the same connection: the position then
// covers the commit and everything the transaction saw, on the server
// that served it, whatever the address points at by then.
const positionQuery = "SELECT @@server_id, @@gtid_binlog_pos"

// sendCommit sends COMMIT (with the lock wait put back, ending); when
// t.at is set, with positionQuery in the same round trip, read into t.at.
func (t *connTx) sendCommit(ctx context.Context) error {
	if t.at == nil {
		_, err := t.conn.ExecContext(ctx, t.ending("COMMIT"))
		return err
	}
	rows, err := t.conn.QueryContext(ctx, t.ending("COMMIT")+"; "+positionQuery)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("repository: no position after COMMIT (does the DSN allow multiStatements?)")
	}
	if err := rows.Scan(&t.at.Server, &t.at.GTIDs); err != nil {
		return err
	}
	return rows.Close()
}

// stampCommit gives every member the commit's position (zero when not
// tracked).
func stampCommit(ms []*member, at *service.Commit) {
	if at == nil {
		return
	}
	for _, m := range ms {
		m.res.Commit = *at
	}
}

// knownUsable reports whether the members' known rows may decide the
// round: when positions are tracked, only rows whose server is known, so
// that the writes can check it is still the one serving (knownServer).
func (s *MySQL) knownUsable(ms []*member) bool {
	if s.replicas == nil {
		return true
	}
	for _, m := range ms {
		if m.b.KnownOn == 0 {
			return false
		}
	}
	return true
}

// confirmRead answers a read of one row that also read its position, at:
// notFound when it found no row, err translated when it failed, else nil
// once the replicas confirm at (an order or a sold-out row from a commit
// the replicas lack may vanish with the primary).
func (s *MySQL) confirmRead(ctx context.Context, err, notFound error, at service.Commit) error {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return notFound
	case err != nil:
		return translate(err, notFound)
	case s.replicas == nil:
		return nil
	}
	if err := s.replicas.Confirm(ctx, at); err != nil {
		return fmt.Errorf("%w: %w", service.ErrOutcomeUnknown, err)
	}
	return nil
}

// orderByKeyAt is OrderByKey with the position of what it read.
func (s *MySQL) orderByKeyAt(ctx context.Context, userID, key string) (service.Order, error) {
	var (
		r  orderRow
		at service.Commit
	)
	err := s.sql.QueryRowContext(ctx, "SELECT id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at, arrival, allocated_at, @@server_id, @@gtid_binlog_pos FROM orders WHERE user_id = ? AND idempotency_key = ?", userID, key).
		Scan(&r.ID, &r.SKUID, &r.UserID, &r.Quantity, &r.IdempotencyKey, &r.CreatedAt, &r.Status, &r.ExpiresAt, &r.SettledAt, &r.Arrival, &r.AllocatedAt, &at.Server, &at.GTIDs)
	if err := s.confirmRead(ctx, err, service.ErrNotFound, at); err != nil {
		return service.Order{}, err
	}
	return r.domain(), nil
}

// skuAt is SKU, confirmed at the position of what it read.
func (s *MySQL) skuAt(ctx context.Context, id int64) (service.SKU, error) {
	sku, at, err := s.readSKUAt(ctx, id)
	if err := s.confirmRead(ctx, err, service.ErrSKUNotFound, at); err != nil {
		return service.SKU{}, err
	}
	return sku, nil
}

// skuAtCommit is SKU with the position of what it read, unconfirmed
// (commitEach's answer is confirmed at it); zero without replicas.
func (s *MySQL) skuAtCommit(ctx context.Context, id int64) (service.SKU, service.Commit, error) {
	if s.replicas == nil {
		sku, err := s.gormStore.SKU(ctx, id)
		return sku, service.Commit{}, err
	}
	sku, at, err := s.readSKUAt(ctx, id)
	if err != nil {
		return service.SKU{}, service.Commit{}, translate(err, service.ErrSKUNotFound)
	}
	return sku, at, nil
}

// readSKUAt reads one SKU and the position it read at.
func (s *MySQL) readSKUAt(ctx context.Context, id int64) (service.SKU, service.Commit, error) {
	var (
		r  skuRow
		at service.Commit
	)
	err := s.sql.QueryRowContext(ctx, "SELECT id, name, total_stock, stock, sold, version, fence, per_user_limit, starts_at, ends_at, created_at, updated_at, waiters, @@server_id, @@gtid_binlog_pos FROM skus WHERE id = ?", id).
		Scan(&r.ID, &r.Name, &r.TotalStock, &r.Stock, &r.Sold, &r.Version, &r.Fence, &r.PerUserLimit, &r.StartsAt, &r.EndsAt, &r.CreatedAt, &r.UpdatedAt, &r.Waiters, &at.Server, &at.GTIDs)
	return r.domain(), at, err
}
