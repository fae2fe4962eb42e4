package events_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/internal/procstat"
	"github.com/seckill/seckill/service"
)

// BenchmarkJetStreamPublish is what one event costs the broker: the
// relay's publisher sends created events, each with its id as
// Nats-Msg-Id, to a private nats-server (file storage, the default
// duplicate window), a window of w at a time as a relay round does, and
// waits for every acknowledgement. ns/op is an event's publication and
// acknowledgement, waited for; broker-µs/event is nats-server's CPU
// (/proc) over the events: the floor of an event's cost on a box that
// runs the broker beside the sale (docs/performance.md, "Comparing two
// versions").
func BenchmarkJetStreamPublish(b *testing.B) {
	for _, w := range []int{64, 1024} {
		b.Run("window "+strconv.Itoa(w), func(b *testing.B) {
			ns, ids, pub := broker(b, 2*time.Minute)
			at := time.Now().UTC()
			msgs := make([]events.Message, 0, w)
			next := 0
			flush := func() {
				errs, err := pub.Publish(context.Background(), msgs)
				if err != nil {
					b.Fatal(err)
				}
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				msgs = msgs[:0]
			}
			// The stream made before the count starts.
			msgs = append(msgs, events.NewMessage(subject, service.OrderEvent{EventID: "warm", Type: service.EventCreated, OrderID: 1}, ids))
			flush()
			cpu0, err := procstat.CPU(ns.Pid())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				next++
				e := service.OrderEvent{ID: int64(next), EventID: fmt.Sprintf("%032x", next), Type: service.EventCreated,
					OrderID: int64(next), SKUID: 1, UserID: "u-" + strconv.Itoa(next), Quantity: 1, Status: service.OrderPending, At: at}
				if msgs = append(msgs, events.NewMessage(subject, e, ids)); len(msgs) == w {
					flush()
				}
			}
			if len(msgs) > 0 {
				flush()
			}
			cpu1, err := procstat.CPU(ns.Pid())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(next), "broker-µs/event")
		})
	}
}
