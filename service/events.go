package service

import "time"

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
