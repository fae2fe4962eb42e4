package repository

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/service"
)

// The outbox (migrations 00006 and 00007, docs/design.md invariant 21):
// with WithEvents, every transaction that changes orders writes their
// events in one statement, so an event exists if and only if its change
// committed: the batch commit one row per run of its new orders created
// alike (createdRuns), every other change one row per order it changed
// (recordEvents). Without it nothing is written and no statement is added.

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
	r := tx.Exec("INSERT INTO order_events (event_id, order_id, last_order_id, type, status, at) SELECT "+eventID+", id, id, ?, status, ? FROM orders WHERE id IN ? ORDER BY id",
		append(args, string(typ), at, ids)...)
	return affected(r, len(ids), "order events")
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

// newEventID is a run's event id, drawn by the writer: 128 random bits in
// hex, a literal in the statement, so every replica stores the same.
func newEventID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// createdRun is a run of a round's new orders, consecutive in the orders'
// INSERT, created with one status: one event row, whatever SKUs and
// batches of the round they belong to. The row's at is its first order's
// creation; each created event's own is its order's created_at
// (eventOrders).
type createdRun struct {
	first  int // the run's first order's place in the INSERT
	n      int
	status service.OrderStatus
	at     time.Time
}

// addCreated extends runs with the next order of the INSERT.
func addCreated(runs []createdRun, status service.OrderStatus, at time.Time, place int) []createdRun {
	if k := len(runs) - 1; k >= 0 && runs[k].status == status && runs[k].first+runs[k].n == place {
		runs[k].n++
		return runs
	}
	return append(runs, createdRun{first: place, n: 1, status: status, at: at})
}

// createdEvents is the batch commit's INSERT of its new orders' events,
// a row per run: the orders' INSERT just before it numbered them from
// LAST_INSERT_ID(), step apart (numberOrders). A run longer than
// service.MaxRunSpan ids is cut. It returns the statement, its arguments and the
// rows it inserts.
func createdEvents(runs []createdRun, step int64) (string, []any, int) {
	var q strings.Builder
	var args []any
	rows := 0
	q.WriteString("; INSERT INTO order_events (event_id, order_id, last_order_id, step, type, status, at) VALUES ")
	per := int(service.MaxRunSpan/step) + 1 // orders a row may tell
	for _, r := range runs {
		for from := r.first; from < r.first+r.n; from += per {
			to := min(from+per, r.first+r.n) - 1
			if rows > 0 {
				q.WriteString(", ")
			}
			rows++
			q.WriteString("(?, LAST_INSERT_ID() + ?, LAST_INSERT_ID() + ?, ?, 'created', ?, ?)")
			args = append(args, newEventID(), int64(from)*step, int64(to)*step, step, string(r.status), r.at)
		}
	}
	return q.String(), args, rows
}

// eventRun is a row of order_events.
type eventRun struct {
	ID          int64
	EventID     string
	OrderID     int64
	LastOrderID int64
	Step        int64
	Type        string
	Status      string
	At          time.Time
}

func (r eventRun) domain() service.EventRun {
	return service.EventRun{ID: r.ID, EventID: r.EventID, First: r.OrderID, Last: r.LastOrderID, Step: r.Step,
		Type: service.EventType(r.Type), Status: service.OrderStatus(r.Status), At: r.At}
}

// Unpublished returns the events not yet published, in id order, a run's
// in its orders' order: whole rows, at most limit of them, and none past
// the one that brings the events to limit. An order's events are there
// in the order of its changes: a later change's transaction waited for
// the earlier one's row lock, so its row has the greater id and is not
// visible without it.
func (s *gormStore) Unpublished(ctx context.Context, limit int) ([]service.OrderEvent, error) {
	rows, err := s.db.WithContext(ctx).Raw("SELECT id, event_id, order_id, last_order_id, step, type, status, at"+
		" FROM order_events WHERE published_at IS NULL ORDER BY id LIMIT ?", limit).Rows()
	if err != nil {
		return nil, translate(err, service.ErrNotFound)
	}
	var out []service.OrderEvent
	for rows.Next() && len(out) < limit {
		var r eventRun
		if err := rows.Scan(&r.ID, &r.EventID, &r.OrderID, &r.LastOrderID, &r.Step, &r.Type, &r.Status, &r.At); err != nil {
			rows.Close()
			return nil, translate(err, service.ErrNotFound)
		}
		run := r.domain()
		n := run.Len()
		if n == 0 {
			rows.Close()
			return nil, fmt.Errorf("repository: order event row %d is not a run (orders %d to %d by %d)", r.ID, r.OrderID, r.LastOrderID, r.Step)
		}
		for k := range n {
			out = append(out, run.Event(k))
		}
	}
	if err := rows.Close(); err != nil {
		return nil, translate(err, service.ErrNotFound)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, service.ErrNotFound)
	}
	return out, s.eventOrders(ctx, out)
}

// eventOrders fills in each event's SKU, buyer and quantity from its
// order, and a created event's time (its order's created_at: a run's row
// keeps its first order's), in one read on the primary key. An event
// whose order does not exist is an error: orders are never deleted.
func (s *gormStore) eventOrders(ctx context.Context, evs []service.OrderEvent) error {
	if len(evs) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(evs))
	seen := make(map[int64]int, len(evs))
	for _, e := range evs {
		if _, ok := seen[e.OrderID]; !ok {
			seen[e.OrderID] = -1
			ids = append(ids, e.OrderID)
		}
	}
	rows, err := s.db.WithContext(ctx).Raw("SELECT id, sku_id, user_id, quantity, created_at FROM orders WHERE id IN ?", ids).Rows()
	if err != nil {
		return translate(err, service.ErrNotFound)
	}
	defer rows.Close()
	type order struct {
		sku, qty int64
		user     string
		created  time.Time
	}
	found := make([]order, 0, len(ids))
	for rows.Next() {
		var id int64
		var o order
		if err := rows.Scan(&id, &o.sku, &o.user, &o.qty, &o.created); err != nil {
			return translate(err, service.ErrNotFound)
		}
		seen[id] = len(found)
		found = append(found, o)
	}
	if err := rows.Err(); err != nil {
		return translate(err, service.ErrNotFound)
	}
	for i := range evs {
		k := seen[evs[i].OrderID]
		if k < 0 {
			return fmt.Errorf("repository: order event row %d tells order %d, which does not exist", evs[i].ID, evs[i].OrderID)
		}
		evs[i].SKUID, evs[i].UserID, evs[i].Quantity = found[k].sku, found[k].user, found[k].qty
		if evs[i].Type == service.EventCreated {
			evs[i].At = found[k].created
		}
	}
	return nil
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
	div := "DIV" // integer division: each run's orders
	if db.Dialector.Name() == "sqlite" {
		div = "/"
	}
	if err := db.Raw("SELECT COALESCE(SUM((last_order_id - order_id) " + div + " step + 1), 0) FROM order_events WHERE published_at IS NULL").Scan(&n).Error; err != nil {
		return 0, time.Time{}, translate(err, service.ErrNotFound)
	}
	if n == 0 {
		return 0, time.Time{}, nil
	}
	// The first unpublished by id: its at is the oldest but for a clock step.
	var first []eventRun
	if err := db.Raw("SELECT id, at FROM order_events WHERE published_at IS NULL ORDER BY id LIMIT 1").Scan(&first).Error; err != nil {
		return 0, time.Time{}, translate(err, service.ErrNotFound)
	}
	if len(first) == 1 {
		oldest = first[0].At
	}
	return n, oldest, nil
}

// eventsAnswer checks the batch commit's created events: a row per run.
func eventsAnswer(got int64, rows int) error {
	if got != int64(rows) {
		return fmt.Errorf("repository: %d order event rows for %d runs of new orders", got, rows)
	}
	return nil
}
