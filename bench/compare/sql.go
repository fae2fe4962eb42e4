package compare

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/mysqlerr"
	"github.com/seckill/seckill/service"
)

// errConflict is a guard that matched no row, or a write that lost a
// race the database detected: the order is tried again on a fresh read.
var errConflict = errors.New("compare: concurrent update")

// Open opens the service's MySQL database for the designs. A transaction
// is three round trips, as the service's own batch commit: START
// TRANSACTION with the reads, the writes, COMMIT; so the row lock is held
// as long as there, and the designs differ from it only in design. Row
// lock waits are bounded by lockWait (rounded up to whole seconds).
func Open(dsn string, maxOpen, maxIdle int, lockWait time.Duration) (*sql.DB, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("compare: mysql dsn: %w", err)
	}
	mc.ParseTime, mc.Loc = true, time.UTC
	mc.InterpolateParams = true // a multi-statement cannot be a prepared statement
	mc.MultiStatements = true
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	mc.Params["innodb_lock_wait_timeout"] = strconv.Itoa(int(max(1, math.Ceil(lockWait.Seconds()))))
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(maxIdle)
	return db, nil
}

// CreateSKU inserts a SKU on sale now with stock units, at most limit per buyer.
func CreateSKU(ctx context.Context, db *sql.DB, name string, stock, limit int64) (int64, error) {
	now := time.Now().UTC()
	res, err := db.ExecContext(ctx, "INSERT INTO skus (name, total_stock, stock, per_user_limit, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
		name, stock, stock, limit, now, now)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// sell is one order's transaction. fence > 0 is the lock's fencing token,
// written with the order and required no older than the row's.
func (o *Orders) sell(ctx context.Context, r service.OrderRequest, fence int64) (service.Order, error) {
	conn, err := o.db.Conn(ctx)
	if err != nil {
		return service.Order{}, err
	}
	tx := &connTx{conn: conn}
	defer tx.end()
	now := time.Now().UTC().Truncate(time.Microsecond)
	sku, held, err := tx.read(ctx, r, o.design == Pessimistic)
	if err != nil {
		return service.Order{}, err
	}
	if service.FenceStale(sku.Fence, fence) {
		return service.Order{}, fmt.Errorf("%w: sku %d holds fence %d, newer than this lease's %d", service.ErrUnavailable, sku.ID, sku.Fence, fence)
	}
	if err := decide(sku, held, r, now); err != nil {
		return service.Order{}, err
	}
	order := service.Order{SKUID: r.SKUID, UserID: r.UserID, Quantity: r.Quantity, CreatedAt: now, Status: service.OrderPaid}
	if o.cfg.PaymentTimeout > 0 {
		due := now.Add(o.cfg.PaymentTimeout)
		order.Status, order.ExpiresAt = service.OrderPending, &due
	}
	if order.ID, err = tx.write(ctx, sku, order, fence, o.design != Conditional); err != nil {
		return service.Order{}, err
	}
	if err := ctx.Err(); err != nil { // not sent: end rolls back
		return service.Order{}, fmt.Errorf("%w: nothing committed: %w", service.ErrUnavailable, err)
	}
	if err := tx.commit(ctx); err != nil {
		return service.Order{}, fmt.Errorf("%w: COMMIT: %w", service.ErrOutcomeUnknown, err)
	}
	return order, nil
}

// decide answers r on the SKU and the buyer's holding read, as the
// service's allocation does for one request.
func decide(sku service.SKU, held int64, r service.OrderRequest, now time.Time) error {
	switch {
	case !sku.Active(now):
		return service.ErrSaleNotActive
	case held+r.Quantity > sku.PerUserLimit:
		return service.ErrLimitExceeded
	case sku.Stock == 0:
		return service.ErrSoldOut
	case r.Quantity > sku.Stock:
		return service.ErrInsufficientStock
	}
	return nil
}

// connTx is a transaction on one pooled connection whose START
// TRANSACTION travels with its reads.
type connTx struct {
	conn *sql.Conn
	open bool // START TRANSACTION may have run, and neither COMMIT nor ROLLBACK has
}

// read starts the transaction and reads the SKU (locking its row with
// forUpdate) and what the buyer holds of it, in one round trip.
func (t *connTx) read(ctx context.Context, r service.OrderRequest, forUpdate bool) (service.SKU, int64, error) {
	q := "START TRANSACTION; SELECT id, stock, version, fence, per_user_limit, starts_at, ends_at FROM skus WHERE id = ?"
	if forUpdate {
		q += " FOR UPDATE"
	}
	q += "; SELECT quantity FROM user_purchases WHERE sku_id = ? AND user_id = ?"
	t.open = true // even a failed query may have started the transaction
	rows, err := t.conn.QueryContext(ctx, q, r.SKUID, r.SKUID, r.UserID)
	if err != nil {
		return service.SKU{}, 0, translate(err)
	}
	defer rows.Close()
	var (
		sku          service.SKU
		starts, ends sql.NullTime
	)
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return service.SKU{}, 0, translate(err)
		}
		return service.SKU{}, 0, service.ErrSKUNotFound
	}
	if err := rows.Scan(&sku.ID, &sku.Stock, &sku.Version, &sku.Fence, &sku.PerUserLimit, &starts, &ends); err != nil {
		return service.SKU{}, 0, err
	}
	if starts.Valid {
		sku.StartsAt = &starts.Time
	}
	if ends.Valid {
		sku.EndsAt = &ends.Time
	}
	if !rows.NextResultSet() {
		return service.SKU{}, 0, fmt.Errorf("compare: the holding's result set is missing: %v", rows.Err())
	}
	var held int64
	for rows.Next() {
		if err := rows.Scan(&held); err != nil {
			return service.SKU{}, 0, err
		}
	}
	return sku, held, translate(rows.Err())
}

// write takes the order's units from the SKU, under its guard (stock, the
// version read unless withVersion is false, the fence when there is one),
// inserts the order and adds to the buyer's holding, in one round trip,
// and returns the order's id. A guard that matched no row is errConflict.
func (t *connTx) write(ctx context.Context, sku service.SKU, o service.Order, fence int64, withVersion bool) (int64, error) {
	q := "UPDATE skus SET stock = stock - ?, sold = sold + ?, version = version + 1, updated_at = ?"
	args := []any{o.Quantity, o.Quantity, o.CreatedAt}
	if fence > 0 {
		q += ", fence = ?"
		args = append(args, fence)
	}
	q += " WHERE id = ? AND stock >= ?"
	args = append(args, sku.ID, o.Quantity)
	if withVersion {
		q += " AND version = ?"
		args = append(args, sku.Version)
	}
	if fence > 0 { // a fence above the backend's ceiling is the other lock backend's
		q += " AND (fence <= ? OR fence > ?)"
		args = append(args, fence, service.FenceCeiling(fence))
	}
	var expires any // NULL: paid at creation
	if o.ExpiresAt != nil {
		expires = *o.ExpiresAt
	}
	q += "; INSERT INTO orders (sku_id, user_id, quantity, created_at, status, expires_at) VALUES (?, ?, ?, ?, ?, ?)"
	args = append(args, o.SKUID, o.UserID, o.Quantity, o.CreatedAt, string(o.Status), expires)
	// Deltas, not totals: without the version guard (Conditional) the
	// CHECK constraint still sees the true holding.
	q += "; INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE quantity = quantity + VALUES(quantity)"
	args = append(args, sku.ID, o.UserID, o.Quantity, sku.PerUserLimit)

	res, err := t.exec(ctx, q, args...)
	if err != nil {
		return 0, translate(err)
	}
	affected, ids := res.AllRowsAffected(), res.AllLastInsertIds()
	if len(affected) != 3 || len(ids) != 3 {
		return 0, fmt.Errorf("compare: %d answers to the 3 writes", len(affected))
	}
	if affected[0] != 1 {
		return 0, errConflict
	}
	return ids[1], nil
}

// exec runs a multi-statement of writes and returns every statement's
// rows affected and insert id, which database/sql keeps for the last only.
func (t *connTx) exec(ctx context.Context, query string, args ...any) (mysql.Result, error) {
	var res mysql.Result
	err := t.conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return errors.New("compare: the driver cannot execute on a connection")
		}
		named := make([]driver.NamedValue, len(args))
		for i, a := range args {
			named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		}
		r, err := ex.ExecContext(ctx, query, named)
		if err != nil {
			return err
		}
		if res, ok = r.(mysql.Result); !ok {
			return errors.New("compare: the driver does not report each statement's result")
		}
		return nil
	})
	return res, err
}

// commit commits, to the server's answer whatever ctx does meanwhile: a
// buyer's leaving never cuts a COMMIT in half.
func (t *connTx) commit(ctx context.Context) error {
	if _, err := t.conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		return err
	}
	t.open = false
	return nil
}

// end rolls back what did not commit and returns the connection to the
// pool; one that could not be rolled back is closed instead.
func (t *connTx) end() {
	if t.open {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := t.conn.ExecContext(ctx, "ROLLBACK")
		cancel()
		if err != nil {
			_ = t.conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
		}
	}
	_ = t.conn.Close()
}

// translate reads a driver error: a deadlock or a duplicate is a race
// lost, tried again; a CHECK failure can only be the per-user limit,
// reached by a concurrent order of the same buyer that the read missed.
func translate(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case mysqlerr.DuplicateEntry, mysqlerr.Deadlock:
			return fmt.Errorf("%w: %w", errConflict, err)
		case mysqlerr.CheckViolated, mysqlerr.ConstraintFailed:
			return fmt.Errorf("%w: %w", service.ErrLimitExceeded, err)
		}
	}
	return err
}
