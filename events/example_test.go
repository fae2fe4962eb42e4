package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill/seckill/events"
)

// fulfil ships a paid order; it is called at least once per paid order.
func fulfil(p events.Payload) error {
	fmt.Println("ship", p.OrderID, p.Quantity, "of sku", p.SKUID, "to", p.UserID)
	return nil
}

// A fulfilment consumer: a durable consumer of the stream ships every
// order that becomes paid — created paid, paid, or allocated paid —
// once, dropping republications by event id. A real one keeps the ids
// it has seen where it records the shipment, in the same transaction.
func Example_fulfilment() {
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.Timeout(time.Second))
	if err != nil {
		return // no broker here
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(ctx, "SECKILL_ORDERS", jetstream.ConsumerConfig{
		Durable: "fulfilment", AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: "seckill.orders.>",
	})
	if err != nil {
		return
	}
	seen := map[string]bool{} // event ids done: a table beside the shipments in a real consumer
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var p events.Payload
		if err := json.Unmarshal(m.Data(), &p); err != nil {
			_ = m.Term() // not an event: never redeliver
			return
		}
		if seen[p.EventID] || p.Status != "paid" {
			_ = m.Ack()
			return
		}
		if err := fulfil(p); err != nil {
			_ = m.Nak() // redelivered later
			return
		}
		seen[p.EventID] = true
		_ = m.Ack()
	})
	if err != nil {
		return
	}
	<-ctx.Done()
	cc.Stop()
}
