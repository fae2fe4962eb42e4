package repository

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/service"
)

// Every write the service acknowledges waits for the replicas as an
// order does (docs/design.md, invariant 18): a payment, a cancel, a SKU
// created, edited or restocked is answered, success or refusal, only once
// mysql.min_replicas replicas have the position read after its COMMIT on
// the same connection, which covers the write and everything it read.
// Not confirmed in time, it is service.ErrOutcomeUnknown; each of these
// writes is idempotent, so the retry answers truly.
//
// The sweeper's sweeps are confirmed too: nobody asked for them, but the
// waiting orders a sweep gives units hear of it at once (their
// long-polls), and a waiter told it holds a unit must not lose it to a
// failover. A sweep not confirmed in time has committed what it did; it
// tells nobody, and the long-polls' recheck reads it.

// confirmed runs write on one connection of the pool and, with replicas,
// reads that connection's position after it and returns write's answer
// once the replicas confirm it. A write whose answer is a driver error
// (nothing known of it) is returned as is.
func (s *MySQL) confirmed(ctx context.Context, write func(g gormStore) error) error {
	if s.replicas == nil {
		return write(s.gormStore)
	}
	var (
		at         service.Commit
		werr, perr error
	)
	err := s.db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		g := s.gormStore
		g.db = conn
		werr = write(g)
		perr = conn.Raw(positionQuery).Row().Scan(&at.Server, &at.GTIDs)
		return nil
	})
	switch {
	case err != nil:
		return translate(err, service.ErrNotFound)
	case perr != nil && werr == nil:
		return fmt.Errorf("%w: the write's position cannot be read: %w", service.ErrOutcomeUnknown, perr)
	case perr != nil:
		return werr
	}
	if cerr := s.replicas.Confirm(ctx, at); cerr != nil {
		return fmt.Errorf("%w: %w", service.ErrOutcomeUnknown, cerr)
	}
	return werr
}

// payQuery pays a pending order not yet due, then reads in the same round
// trip what the UPDATE changed, the order as it now is and, after the
// UPDATE's autocommit on the same connection, the position that covers
// it.
const payQuery = "UPDATE orders SET status = ?, settled_at = ? WHERE id = ? AND status = ? AND expires_at > ?; " +
	"SELECT ROW_COUNT(), id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at, arrival, allocated_at, @@server_id, @@gtid_binlog_pos FROM orders WHERE id = ?"

// PayOrder is gormStore.PayOrder in one round trip (payQuery), its
// answer confirmed with replicas; with events, gormStore.PayOrder's
// transaction, confirmed.
func (s *MySQL) PayOrder(ctx context.Context, id int64, now time.Time) (service.Settlement, error) {
	if s.events { // its event in its transaction: gormStore's, confirmed
		var st service.Settlement
		err := s.confirmed(ctx, func(g gormStore) (err error) {
			st, err = g.PayOrder(ctx, id, now)
			return err
		})
		return st, err
	}
	var (
		r       orderRow
		changed int64
		at      service.Commit
	)
	err := s.sql.QueryRowContext(ctx, payQuery, service.OrderPaid, now, id, service.OrderPending, now, id).
		Scan(&changed, &r.ID, &r.SKUID, &r.UserID, &r.Quantity, &r.IdempotencyKey, &r.CreatedAt, &r.Status, &r.ExpiresAt, &r.SettledAt, &r.Arrival, &r.AllocatedAt, &at.Server, &at.GTIDs)
	if err := s.confirmRead(ctx, err, service.ErrNotFound, at); err != nil {
		return service.Settlement{}, err
	}
	o := r.domain()
	switch {
	case changed == 1:
		return service.Settlement{Order: o, Changed: true}, nil
	case o.Status == service.OrderPaid:
		return service.Settlement{Order: o}, nil
	case o.Status == service.OrderPending:
		return service.Settlement{}, service.ErrOrderExpired // due, not swept yet
	}
	return service.Settlement{}, service.ErrOfStatus(o.Status)
}

// CancelOrder is gormStore.CancelOrder, confirmed.
func (s *MySQL) CancelOrder(ctx context.Context, id int64, buyer string, now time.Time) (service.Settlement, error) {
	var st service.Settlement
	err := s.confirmed(ctx, func(g gormStore) (err error) {
		st, err = g.CancelOrder(ctx, id, buyer, now)
		return err
	})
	return st, err
}

// ExpireDue is gormStore.ExpireDue, confirmed.
func (s *MySQL) ExpireDue(ctx context.Context, run service.ExpiryRun) (service.Expiry, error) {
	var ex service.Expiry
	err := s.confirmed(ctx, func(g gormStore) (err error) {
		ex, err = g.ExpireDue(ctx, run)
		return err
	})
	return ex, err
}

// CreateSKU is gormStore.CreateSKU, confirmed.
func (s *MySQL) CreateSKU(ctx context.Context, sku service.SKU) (service.SKU, error) {
	var out service.SKU
	err := s.confirmed(ctx, func(g gormStore) (err error) {
		out, err = g.CreateSKU(ctx, sku)
		return err
	})
	return out, err
}

// SetStock is gormStore.SetStock, confirmed.
func (s *MySQL) SetStock(ctx context.Context, id, stock int64) (service.SKU, []service.Order, error) {
	var (
		out      service.SKU
		allotted []service.Order
	)
	err := s.confirmed(ctx, func(g gormStore) (err error) {
		out, allotted, err = g.SetStock(ctx, id, stock)
		return err
	})
	return out, allotted, err
}

// UpdateSKU is gormStore.UpdateSKU, confirmed.
func (s *MySQL) UpdateSKU(ctx context.Context, id int64, ch service.SKUChange, now time.Time) (service.SKU, error) {
	var out service.SKU
	err := s.confirmed(ctx, func(g gormStore) (err error) {
		out, err = g.UpdateSKU(ctx, id, ch, now)
		return err
	})
	return out, err
}

// Unpublished is gormStore.Unpublished confirmed with the replicas: the
// relay publishes an event only once mysql.min_replicas replicas have the
// rows it was read from (the position read after the read, on the same
// connection, covers them), so that a failover never loses a change the
// stream has told (docs/design.md, invariants 18 and 21). Not confirmed
// in time, it fails, and the relay backs off and reads again.
func (s *MySQL) Unpublished(ctx context.Context, limit int) ([]service.OrderEvent, error) {
	var evs []service.OrderEvent
	err := s.confirmed(ctx, func(g gormStore) (err error) {
		evs, err = g.Unpublished(ctx, limit)
		return err
	})
	return evs, err
}
