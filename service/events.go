package service

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
)

// EventType names an order's change in the outbox (docs/api.md, "Order
// events").
type EventType string

// The changes of an order. A new order's event is EventCreated whatever
// its status (pending, paid when order.payment_timeout is 0, or waiting).
const (
	EventCreated   EventType = "created"
	EventPaid      EventType = "paid"
	EventCancelled EventType = "cancelled"
	EventExpired   EventType = "expired"
	EventAllocated EventType = "allocated" // a waiting order given its units
	EventLapsed    EventType = "lapsed"    // a waiting order whose sale ended
)

// OrderEvent is one committed change of an order as the outbox holds it.
type OrderEvent struct {
	ID       int64  // the outbox row's number: its order, in this database only
	EventID  string // random, the same in every publication of it: the broker's and consumers' id
	Type     EventType
	OrderID  int64
	SKUID    int64
	UserID   string
	Quantity int64
	Status   OrderStatus // after the change
	At       time.Time
}

// EventRun is one row of the outbox: the change Type of the orders First,
// First+Step, ..., Last, each left in Status at At. A change of one order
// is a run of one (First = Last); a batch's new orders created alike are
// one run (migration 00007), so that the outbox writes a row a batch and
// not a row an order.
type EventRun struct {
	ID      int64  // the row's number: its order, in this database only
	EventID string // the first order's event's id; the others' derive from it (RunEventID)
	First   int64
	Last    int64
	Step    int64
	Type    EventType
	Status  OrderStatus
	At      time.Time
}

// MaxRunSpan is the most ids one run spans (migration 00007's CHECK): the
// run that tells an order has a first order at most this far below it.
const MaxRunSpan = 65535

// Len is the number of orders, and events, of the run; 0 for a row that
// is not a run (a step below 1, or Last before First or off the step).
func (r EventRun) Len() int {
	if r.Step < 1 || r.Last < r.First || (r.Last-r.First)%r.Step != 0 {
		return 0
	}
	return int((r.Last-r.First)/r.Step) + 1
}

// Event returns the run's k-th event (0 <= k < Len).
func (r EventRun) Event(k int) OrderEvent {
	return OrderEvent{ID: r.ID, EventID: RunEventID(r.EventID, k), Type: r.Type, OrderID: r.First + int64(k)*r.Step, Status: r.Status, At: r.At}
}

// RunEventID is the id of a run's k-th event: the row's own for the first,
// then the first 128 bits of SHA-256 of the row's id and k, in hex: as
// random as the row's, and the same at every reading of the row.
func RunEventID(first string, k int) string {
	if k == 0 {
		return first
	}
	sum := sha256.Sum256([]byte(first + "/" + strconv.Itoa(k)))
	return hex.EncodeToString(sum[:16])
}

// Follows reports whether an event of type t may take an order from
// before ("" for none yet) to after: the lifecycle's edges (lifecycle.go,
// waitlist.go) as the outbox tells them.
func (t EventType) Follows(before, after OrderStatus) bool {
	switch t {
	case EventCreated:
		return before == "" && (after == OrderPending || after == OrderPaid || after == OrderWaiting)
	case EventPaid:
		return before == OrderPending && after == OrderPaid
	case EventCancelled:
		return (before == OrderPending || before == OrderWaiting) && after == OrderCancelled
	case EventExpired:
		return before == OrderPending && after == OrderExpired
	case EventAllocated:
		return before == OrderWaiting && (after == OrderPending || after == OrderPaid)
	case EventLapsed:
		return before == OrderWaiting && after == OrderLapsed
	}
	return false
}

// ChainBreach is an event CheckChain refuses.
type ChainBreach struct {
	Event  OrderEvent
	Before OrderStatus // the order's status before it
	Known  bool        // the order is known
}

func (b ChainBreach) Error() string {
	if !b.Known {
		return fmt.Sprintf("event %d of order %d, which does not exist", b.Event.ID, b.Event.OrderID)
	}
	return fmt.Sprintf("event %d: order %d %s from %q (to %s)", b.Event.ID, b.Event.OrderID, b.Event.Type, b.Before, b.Event.Status)
}

// CheckChain walks evs, in the order given, from the statuses in last
// (an order absent from it is unknown), leaving in last each order's
// status after its events, and returns each event that breaks the chain:
// one of an unknown order, or a change Follows refuses.
func CheckChain(evs []OrderEvent, last map[int64]OrderStatus) []ChainBreach {
	var breaches []ChainBreach
	for _, e := range evs {
		before, known := last[e.OrderID]
		if !known || !e.Type.Follows(before, e.Status) {
			breaches = append(breaches, ChainBreach{Event: e, Before: before, Known: known})
		}
		if known {
			last[e.OrderID] = e.Status
		}
	}
	return breaches
}
