package repository

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/service"
)

// The outbox (migrations 00006, docs/design.md invariant 21): with
// WithEvents, every transaction that changes orders inserts their events
// in one INSERT ... SELECT of the rows it has just written, so an event
// exists if and only if its change committed. Without it nothing is
// written and no statement is added.

// eventsFence names the relay's row in leader_fences (migration 00006).
const eventsFence = "order-events"

// WithEvents makes the store write an order event with every change of
// an order (events.enabled).
func WithEvents() Option {
	return func(o *options) { o.events = true }
}

// recordEvents inserts one event of type typ per order of ids, with the
// status tx leaves it in, in one statement; an order the statement does
// not find fails the transaction. Without events it writes nothing.
func (s *gormStore) recordEvents(tx *gorm.DB, typ service.EventType, ids []int64, at time.Time) error {
	if !s.events || len(ids) == 0 {
		return nil
	}
	eventID, args := newEventIDs(tx.Dialector.Name())
	r := tx.Exec("INSERT INTO order_events (event_id, order_id, type, status, at) SELECT "+eventID+", id, ?, status, ? FROM orders WHERE id IN ? ORDER BY id",
		append(args, string(typ), at, ids)...)
	return affected(r, len(ids), "order events")
}

// createdEvents is the batch commit's INSERT of its new orders' events:
// the orders' INSERT just before it numbered them from LAST_INSERT_ID(),
// auto_increment_increment apart (numberOrders), n of them.
func createdEvents(n int) (string, []any) {
	eventID, args := newEventIDs("mysql")
	return "; INSERT INTO order_events (event_id, order_id, type, status, at) SELECT " + eventID + ", id, 'created', status, created_at FROM orders" +
		" WHERE id BETWEEN LAST_INSERT_ID() AND LAST_INSERT_ID() + ? * @@auto_increment_increment ORDER BY id", append(args, n-1)
}

// newEventIDs returns the expression of each new event's id in an INSERT
// ... SELECT of orders, and its arguments: 128 random bits in hex, never
// the row's number, which a database restored from a backup or recreated
// issues again (and the broker's duplicate window and every consumer
// would drop the new event as the old one's copy). On MySQL it is the MD5
// of 128 random bits drawn per statement and the order's id: a per-row
// UUID() or RAND() would differ on the replicas under
// binlog_format=STATEMENT, and the id must survive a failover. SQLite
// draws it per row.
func newEventIDs(dialect string) (string, []any) {
	if dialect == "sqlite" {
		return "lower(hex(randomblob(16)))", nil
	}
	return "MD5(CONCAT(?, id))", []any{rand.Text()}
}

// eventRow is a row of order_events joined with its order.
type eventRow struct {
	ID       int64
	EventID  string
	OrderID  int64
	Type     string
	Status   string
	At       time.Time
	SKUID    int64 `gorm:"column:sku_id"`
	UserID   string
	Quantity int64
}

// Unpublished returns up to limit events not yet published, in id order.
// An order's events are there in the order of its changes: a later
// change's transaction waited for the earlier one's row lock, so its
// event has the greater id and is not visible without it.
func (s *gormStore) Unpublished(ctx context.Context, limit int) ([]service.OrderEvent, error) {
	var rows []eventRow
	err := s.db.WithContext(ctx).Raw("SELECT e.id, e.event_id, e.order_id, e.type, e.status, e.at, o.sku_id, o.user_id, o.quantity"+
		" FROM order_events e JOIN orders o ON o.id = e.order_id WHERE e.published_at IS NULL ORDER BY e.id LIMIT ?", limit).Scan(&rows).Error
	if err != nil {
		return nil, translate(err, service.ErrNotFound)
	}
	out := make([]service.OrderEvent, len(rows))
	for i, r := range rows {
		out[i] = service.OrderEvent{ID: r.ID, EventID: r.EventID, Type: service.EventType(r.Type), OrderID: r.OrderID, SKUID: r.SKUID,
			UserID: r.UserID, Quantity: r.Quantity, Status: service.OrderStatus(r.Status), At: r.At}
	}
	return out, nil
}

// MarkPublished records the events of ids as published at now, in one
// transaction that first advances the relay's leader fence: a relay whose
// lease was superseded gets service.ErrStaleFence and marks nothing.
func (s *gormStore) MarkPublished(ctx context.Context, ids []int64, fence int64, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := advanceFence(tx, eventsFence, fence); err != nil {
			return err
		}
		return tx.Exec("UPDATE order_events SET published_at = ? WHERE id IN ? AND published_at IS NULL", now, ids).Error
	})
	if err != nil {
		return translateSettle(err)
	}
	return nil
}

// PrunePublished deletes up to limit events published before before,
// oldest first, and returns how many it deleted.
func (s *gormStore) PrunePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	db := s.db.WithContext(ctx)
	var ids []int64
	if err := db.Raw("SELECT id FROM order_events WHERE published_at IS NOT NULL AND published_at < ? ORDER BY published_at, id LIMIT ?",
		before, limit).Scan(&ids).Error; err != nil {
		return 0, translate(err, service.ErrNotFound)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	r := db.Exec("DELETE FROM order_events WHERE id IN ?", ids)
	if r.Error != nil {
		return 0, translate(r.Error, service.ErrNotFound)
	}
	return int(r.RowsAffected), nil
}

// Backlog returns how many events wait to be published and when the
// oldest of them happened (zero without any).
func (s *gormStore) Backlog(ctx context.Context) (n int64, oldest time.Time, err error) {
	db := s.db.WithContext(ctx)
	if err := db.Raw("SELECT COUNT(*) FROM order_events WHERE published_at IS NULL").Scan(&n).Error; err != nil {
		return 0, time.Time{}, translate(err, service.ErrNotFound)
	}
	if n == 0 {
		return 0, time.Time{}, nil
	}
	// The first unpublished by id: its at is the oldest but for a clock step.
	var first []eventRow
	if err := db.Raw("SELECT id, at FROM order_events WHERE published_at IS NULL ORDER BY id LIMIT 1").Scan(&first).Error; err != nil {
		return 0, time.Time{}, translate(err, service.ErrNotFound)
	}
	if len(first) == 1 {
		oldest = first[0].At
	}
	return n, oldest, nil
}

// eventsAnswer checks the batch commit's created events: one per order.
func eventsAnswer(got int64, orders int) error {
	if got != int64(orders) {
		return fmt.Errorf("repository: %d order events for %d new orders", got, orders)
	}
	return nil
}
