package testenv

import (
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/seckill/seckill/service"
)

// Event is one event of the outbox as the tests read it (a row expanded:
// service.EventRun), or one message of the stream.
type Event struct {
	ID        int64  // the outbox row's number: its order; a run's events share it
	EventID   string // the broker's and consumers' id
	OrderID   int64
	Type      service.EventType
	Status    service.OrderStatus
	Published bool // the row is marked published
}

// CheckEvents asserts the outbox's invariant (docs/design.md, invariant
// 21) over every order of the database: its events, in id order, are one
// created, then one per change of status, each from a status it can
// leave (service.CheckChain), and the last has the order's status. An
// event of a change that did not commit, or a change without its event,
// breaks the chain. It returns the events in id order, a run's in its
// orders' order.
func CheckEvents(t testing.TB, db *gorm.DB) []Event {
	t.Helper()
	var rows []struct {
		ID          int64
		EventID     string
		OrderID     int64
		LastOrderID int64
		Step        int64
		Type        service.EventType
		Status      service.OrderStatus
		Published   bool
	}
	if err := db.Raw("SELECT id, event_id, order_id, last_order_id, step, type, status, published_at IS NOT NULL AS published FROM order_events ORDER BY id").
		Scan(&rows).Error; err != nil {
		t.Fatalf("CheckEvents: %v", err)
	}
	var evs []Event
	var chain []service.OrderEvent
	for _, r := range rows {
		run := service.EventRun{ID: r.ID, EventID: r.EventID, First: r.OrderID, Last: r.LastOrderID, Step: r.Step, Type: r.Type, Status: r.Status}
		if run.Len() == 0 {
			t.Errorf("event row %d is not a run: orders %d to %d by %d", r.ID, r.OrderID, r.LastOrderID, r.Step)
		}
		for k := range run.Len() {
			e := run.Event(k)
			chain = append(chain, e)
			evs = append(evs, Event{ID: e.ID, EventID: e.EventID, OrderID: e.OrderID, Type: e.Type, Status: e.Status, Published: r.Published})
		}
	}
	var orders []struct {
		ID     int64
		Status service.OrderStatus
	}
	if err := db.Raw("SELECT id, status FROM orders").Scan(&orders).Error; err != nil {
		t.Fatalf("CheckEvents: %v", err)
	}
	last := map[int64]service.OrderStatus{}
	for _, o := range orders {
		last[o.ID] = ""
	}
	for _, err := range service.CheckChain(chain, last) {
		t.Error(err)
	}
	seen := map[string]int64{}
	for _, e := range evs {
		if len(e.EventID) != 32 || strings.Trim(e.EventID, "0123456789abcdef") != "" {
			t.Errorf("event %d: id %q; want 32 hex digits", e.ID, e.EventID)
		}
		if prev, dup := seen[e.EventID]; dup {
			t.Errorf("events %d and %d share the id %s", prev, e.ID, e.EventID)
		}
		seen[e.EventID] = e.ID
	}
	for _, o := range orders {
		if last[o.ID] != o.Status {
			t.Errorf("order %d is %s; its last event says %q", o.ID, o.Status, last[o.ID])
		}
	}
	return evs
}
