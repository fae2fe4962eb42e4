package events

import (
	"encoding/json"
	"time"

	"github.com/seckill/seckill/service"
)

// Message is one event as the broker carries it.
type Message struct {
	ID      string // the event's id: the broker's message id (Nats-Msg-Id)
	Subject string // <subject prefix>.<type>
	Data    []byte // Payload as JSON
}

// Payload is an event's JSON body (docs/api.md, "Order events").
type Payload struct {
	// EventID is stable: every publication of the event carries it, so a
	// consumer drops what it has seen by it. It is random (32 hex
	// digits): a database restored from a backup never reissues one.
	EventID  string              `json:"event_id"`
	Type     service.EventType   `json:"type"`
	OrderID  string              `json:"order_id"` // as shoppers see it (internal/orderid)
	SKUID    int64               `json:"sku_id"`
	UserID   string              `json:"user_id"`
	Quantity int64               `json:"quantity"`
	Status   service.OrderStatus `json:"status"` // after the change
	At       time.Time           `json:"at"`
}

// NewMessage returns e's message under the subject prefix subject.
func NewMessage(subject string, e service.OrderEvent, ids IDs) Message {
	data, err := json.Marshal(Payload{EventID: e.EventID, Type: e.Type, OrderID: ids.Encode(e.OrderID), SKUID: e.SKUID,
		UserID: e.UserID, Quantity: e.Quantity, Status: e.Status, At: e.At.UTC()})
	if err != nil {
		panic("events: a payload of strings, integers and a time did not marshal: " + err.Error())
	}
	return Message{ID: e.EventID, Subject: subject + "." + string(e.Type), Data: data}
}
