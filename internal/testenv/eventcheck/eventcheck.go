// Package eventcheck holds a database's order events to docs/design.md's
// invariant 21, and the stream they were relayed to to the outbox: the
// tests' testenv.CheckEvents and CheckStream, and the load test, call it.
// It returns what it finds, each breach an error, rather than failing a
// test, and reads the database through database/sql (MariaDB or SQLite).
package eventcheck

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/service"
)

// Event is one event of the outbox (a row expanded: service.EventRun).
type Event struct {
	ID        int64  // the outbox row's number: its order; a run's events share it
	EventID   string // the broker's and consumers' id
	OrderID   int64
	Type      service.EventType
	Status    service.OrderStatus
	Published bool // the row is marked published
}

// Outbox reads every event of db's outbox and returns them in id order,
// a run's in its orders' order, with each breach of the invariant over
// every order: its events, in id order, are one created, then one per
// change of status, each from a status it can leave (service.CheckChain),
// and the last has the order's status; every row is a run, every event id
// 32 hex digits and unique. An event of a change that did not commit, or
// a change without its event, breaks the chain. The error is reading's.
func Outbox(ctx context.Context, db *sql.DB) (evs []Event, breaches []error, err error) {
	rows, err := db.QueryContext(ctx, "SELECT id, event_id, order_id, last_order_id, step, type, status, published_at IS NOT NULL FROM order_events ORDER BY id")
	if err != nil {
		return nil, nil, fmt.Errorf("eventcheck: %w", err)
	}
	defer rows.Close()
	var chain []service.OrderEvent
	for rows.Next() {
		var run service.EventRun
		var published bool
		if err := rows.Scan(&run.ID, &run.EventID, &run.First, &run.Last, &run.Step, &run.Type, &run.Status, &published); err != nil {
			return nil, nil, fmt.Errorf("eventcheck: %w", err)
		}
		if run.Len() == 0 {
			breaches = append(breaches, fmt.Errorf("event row %d is not a run: orders %d to %d by %d", run.ID, run.First, run.Last, run.Step))
		}
		for k := range run.Len() {
			e := run.Event(k)
			chain = append(chain, e)
			evs = append(evs, Event{ID: e.ID, EventID: e.EventID, OrderID: e.OrderID, Type: e.Type, Status: e.Status, Published: published})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("eventcheck: %w", err)
	}
	all, err := orders(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	last := make(map[int64]service.OrderStatus, len(all))
	for _, o := range all {
		last[o.id] = ""
	}
	for _, b := range service.CheckChain(chain, last) {
		breaches = append(breaches, b)
	}
	seen := map[string]int64{}
	for _, e := range evs {
		if len(e.EventID) != 32 || strings.Trim(e.EventID, "0123456789abcdef") != "" {
			breaches = append(breaches, fmt.Errorf("event %d: id %q; want 32 hex digits", e.ID, e.EventID))
		}
		if prev, dup := seen[e.EventID]; dup {
			breaches = append(breaches, fmt.Errorf("events %d and %d share the id %s", prev, e.ID, e.EventID))
		}
		seen[e.EventID] = e.ID
	}
	for _, o := range all {
		if last[o.id] != o.status {
			breaches = append(breaches, fmt.Errorf("order %d is %s; its last event says %q", o.id, o.status, last[o.id]))
		}
	}
	return evs, breaches, nil
}

type order struct {
	id     int64
	status service.OrderStatus
}

// orders reads every order's status, by id.
func orders(ctx context.Context, db *sql.DB) ([]order, error) {
	rows, err := db.QueryContext(ctx, "SELECT id, status FROM orders ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("eventcheck: %w", err)
	}
	defer rows.Close()
	var out []order
	for rows.Next() {
		var o order
		if err := rows.Scan(&o.id, &o.status); err != nil {
			return nil, fmt.Errorf("eventcheck: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Report is what Stream found.
type Report struct {
	Messages int     `json:"messages"` // in the stream, republications included
	Distinct int     `json:"distinct"` // event ids in the stream
	Outbox   int     `json:"outbox"`   // events in the outbox
	Breaches []error `json:"-"`
}

// Stream replays stream, on the NATS server at url, from its first
// message and deduplicates it by event id as a consumer does, and holds
// it to db's outbox, which it checks first (Outbox): every event of the
// outbox exactly once, none it lacks (a change that did not commit), each
// with its row's type, status and order (decode turns the order id
// shoppers see into the row's), and each order's events in the order of
// its changes. Call it once the outbox is all published and nothing is
// pruned. The error is reading's.
func Stream(ctx context.Context, db *sql.DB, url, stream string, decode func(string) (int64, bool)) (Report, error) {
	outbox, breaches, err := Outbox(ctx, db)
	if err != nil {
		return Report{}, err
	}
	row := make(map[string]Event, len(outbox))
	for _, e := range outbox {
		row[e.EventID] = e
	}
	msgs, mismatched, err := replay(ctx, url, stream)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Messages: len(msgs), Outbox: len(outbox), Breaches: append(breaches, mismatched...)}
	bad := func(format string, args ...any) { rep.Breaches = append(rep.Breaches, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	last := map[int64]int64{} // each order's last event in the stream: its row's number
	for _, p := range msgs {
		if seen[p.EventID] {
			continue
		}
		seen[p.EventID] = true
		e, ok := row[p.EventID]
		order, known := decode(p.OrderID)
		switch {
		case !ok:
			bad("the stream's event %s (order %s %s) is not in the outbox: a change that did not commit?", p.EventID, p.OrderID, p.Type)
			continue
		case !known || order != e.OrderID || p.Type != e.Type || p.Status != e.Status:
			bad("the stream's event %s says order %s (%d) %s to %s; its row says order %d %s to %s",
				p.EventID, p.OrderID, order, p.Type, p.Status, e.OrderID, e.Type, e.Status)
		}
		if prev, ok := last[e.OrderID]; ok && prev > e.ID {
			bad("order %d: event %s (row %d) after row %d in the stream", e.OrderID, p.EventID, e.ID, prev)
		}
		last[e.OrderID] = e.ID
	}
	rep.Distinct = len(seen)
	for _, e := range outbox {
		if !seen[e.EventID] {
			bad("outbox event %d (%s, order %d %s) is not in the stream", e.ID, e.EventID, e.OrderID, e.Type)
		}
	}
	return rep, nil
}

// replay reads every message of stream, in stream order; mismatched
// names each whose Nats-Msg-Id is not its event id.
func replay(ctx context.Context, url, stream string) (out []events.Payload, mismatched []error, err error) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("eventcheck: replay: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, fmt.Errorf("eventcheck: replay: %w", err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, nil, fmt.Errorf("eventcheck: replay: stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("eventcheck: replay: %w", err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return nil, nil, fmt.Errorf("eventcheck: replay: message %d: %w", seq, err)
		}
		var p events.Payload
		if err := json.Unmarshal(m.Data, &p); err != nil {
			return nil, nil, fmt.Errorf("eventcheck: replay: message %d: %w", seq, err)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != p.EventID {
			mismatched = append(mismatched, fmt.Errorf("message %d: Nats-Msg-Id %q, event id %q; want the same", seq, id, p.EventID))
		}
		out = append(out, p)
	}
	return out, mismatched, nil
}
