package events_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

// outbox is an Outbox of fixed events that records the rows marked.
type outbox struct {
	evs    []service.OrderEvent
	marked []int64
}

func (o *outbox) Unpublished(context.Context, int) ([]service.OrderEvent, error) { return o.evs, nil }
func (o *outbox) MarkPublished(_ context.Context, rows []int64, _ int64, _ time.Time) error {
	o.marked = append(o.marked, rows...)
	return nil
}
func (o *outbox) PrunePublished(context.Context, time.Time, int) (int, error) { return 0, nil }
func (o *outbox) Backlog(context.Context) (int64, time.Time, error)           { return 0, time.Time{}, nil }

// publisher acknowledges every message but those of refused orders, and
// records what it was given, a call at a time.
type publisher struct {
	refuse map[string]bool // by event id
	calls  [][]string
}

func (p *publisher) Publish(_ context.Context, msgs []events.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	var call []string
	for i, m := range msgs {
		call = append(call, m.ID)
		if p.refuse[m.ID] {
			errs[i] = errors.New("refused")
		}
	}
	p.calls = append(p.calls, call)
	return errs, nil
}

type plainIDs struct{}

func (plainIDs) Encode(id int64) string { return strconv.FormatInt(id, 10) }

// TestRound_ARowIsMarkedOnceAllItsEventsAreAcknowledged: a row is a run
// of several orders' events; the relay marks it only when the broker has
// acknowledged every one of them, publishes an order's events one at a
// time (a later event of an order waits for the next publication), marks
// what the broker acknowledged of a publication it partly refused, and
// publishes nothing after it.
func TestRound_ARowIsMarkedOnceAllItsEventsAreAcknowledged(t *testing.T) {
	t.Parallel()
	run := service.EventRun{ID: 1, EventID: "r1", First: 1, Last: 3, Step: 1, Type: service.EventCreated, Status: service.OrderPending}
	evs := []service.OrderEvent{run.Event(0), run.Event(1), run.Event(2),
		{ID: 2, EventID: "p2", OrderID: 2, Type: service.EventPaid, Status: service.OrderPaid},
		{ID: 3, EventID: "c4", OrderID: 4, Type: service.EventCreated, Status: service.OrderPending}}
	for _, tc := range []struct {
		name   string
		refuse string // an event id the broker refuses
		marked []int64
		calls  int
	}{
		{"all acknowledged", "", []int64{1, 2, 3}, 2},
		{"a run's last event refused", evs[2].EventID, nil, 1},
		{"an event of the second publication refused", "p2", []int64{1, 3}, 2}, // order 4's own is acknowledged
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ob := &outbox{evs: evs}
			pub := &publisher{refuse: map[string]bool{tc.refuse: tc.refuse != ""}}
			r := events.NewRelay(ob, pub, nil, plainIDs{}, events.Config{Subject: "s", Batch: 10, PublishTimeout: time.Second}, testenv.Logger(), nil)
			_, err := r.Round(context.Background(), 0)
			if (err != nil) != (tc.refuse != "") {
				t.Errorf("round = %v; want an error iff the broker refused", err)
			}
			if !slices.Equal(ob.marked, tc.marked) {
				t.Errorf("rows marked %v; want %v", ob.marked, tc.marked)
			}
			if len(pub.calls) != tc.calls {
				t.Fatalf("%d publications %v; want %d", len(pub.calls), pub.calls, tc.calls)
			}
			if first := pub.calls[0]; len(first) != 3 || slices.Contains(first, "p2") {
				t.Errorf("the first publication %v; want the run's three, without order 2's payment", first)
			}
		})
	}
}
