package testenv

import (
	"fmt"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/seckill/seckill/service"
)

// Event is one outbox row as the tests read it, or one message of the
// stream.
type Event struct {
	ID      int64  // the outbox row's number: its order
	EventID string // the broker's and consumers' id
	OrderID int64
	Type    service.EventType
	Status  service.OrderStatus
}

// legal is each event type's status before it: "" for none.
var legal = map[service.EventType][]service.OrderStatus{
	service.EventCreated:   {""},
	service.EventPaid:      {service.OrderPending},
	service.EventCancelled: {service.OrderPending, service.OrderWaiting},
	service.EventExpired:   {service.OrderPending},
	service.EventAllocated: {service.OrderWaiting},
	service.EventLapsed:    {service.OrderWaiting},
}

// CheckEvents asserts the outbox's invariant (docs/design.md, invariant
// 21) over every order of the database: its events, in id order, are one
// created, then one per change of status, each from a status it can
// leave, and the last has the order's status. An event of a change that
// did not commit, or a change without its event, breaks the chain. It
// returns the events in id order.
func CheckEvents(t testing.TB, db *gorm.DB) []Event {
	t.Helper()
	var evs []Event
	if err := db.Raw("SELECT id, event_id, order_id, type, status FROM order_events ORDER BY id").Scan(&evs).Error; err != nil {
		t.Fatalf("CheckEvents: %v", err)
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
	for _, err := range Chain(evs, last) {
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

// Chain walks evs, in the order given, from the statuses in last (an
// order absent from it is unknown), leaving in last each order's status
// after its events, and returns each breach of the chain.
func Chain(evs []Event, last map[int64]service.OrderStatus) []error {
	var errs []error
	for _, e := range evs {
		before, known := last[e.OrderID]
		if !known {
			errs = append(errs, fmt.Errorf("event %d of order %d, which does not exist", e.ID, e.OrderID))
			continue
		}
		ok := false
		for _, s := range legal[e.Type] {
			ok = ok || s == before
		}
		if !ok || !lands(e) {
			errs = append(errs, fmt.Errorf("event %d: order %d %s from %q (to %s)", e.ID, e.OrderID, e.Type, before, e.Status))
		}
		last[e.OrderID] = e.Status
	}
	return errs
}

// lands reports whether e's status is one its type leads to.
func lands(e Event) bool {
	switch e.Type {
	case service.EventCreated:
		return e.Status == service.OrderPending || e.Status == service.OrderPaid || e.Status == service.OrderWaiting
	case service.EventAllocated:
		return e.Status == service.OrderPending || e.Status == service.OrderPaid
	}
	return string(e.Status) == string(e.Type)
}
