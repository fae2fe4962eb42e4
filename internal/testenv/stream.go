package testenv

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/seckill/seckill/events"
)

// CheckStream replays stream, on the NATS server at url, from its first
// message and deduplicates it by event id as a consumer does, then
// asserts that it is the outbox of db, which it checks first
// (CheckEvents): every event of the outbox exactly once, none it lacks
// (a change that did not commit), each with its row's type, status and
// order (decode turns the order id shoppers see into the row's), and each
// order's events in the order of its changes. Call it once the outbox is
// all published and nothing is pruned. It returns how many messages the
// stream holds, republications included.
func CheckStream(t testing.TB, db *gorm.DB, url, stream string, decode func(string) (int64, bool)) int {
	t.Helper()
	outbox := CheckEvents(t, db)
	row := make(map[string]Event, len(outbox))
	for _, e := range outbox {
		row[e.EventID] = e
	}
	msgs := replay(t, url, stream)
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
			t.Errorf("the stream's event %s (order %s %s) is not in the outbox: a change that did not commit?", p.EventID, p.OrderID, p.Type)
			continue
		case !known || order != e.OrderID || p.Type != e.Type || p.Status != e.Status:
			t.Errorf("the stream's event %s says order %s (%d) %s to %s; its row says order %d %s to %s",
				p.EventID, p.OrderID, order, p.Type, p.Status, e.OrderID, e.Type, e.Status)
		}
		if prev, ok := last[e.OrderID]; ok && prev > e.ID {
			t.Errorf("order %d: event %s (row %d) after row %d in the stream", e.OrderID, p.EventID, e.ID, prev)
		}
		last[e.OrderID] = e.ID
	}
	for _, e := range outbox {
		if !seen[e.EventID] {
			t.Errorf("outbox event %d (%s, order %d %s) is not in the stream", e.ID, e.EventID, e.OrderID, e.Type)
		}
	}
	return len(msgs)
}

// replay reads every message of stream, in stream order.
func replay(t testing.TB, url, stream string) []events.Payload {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("replay: stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	var out []events.Payload
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("replay: message %d: %v", seq, err)
		}
		var p events.Payload
		if err := json.Unmarshal(m.Data, &p); err != nil {
			t.Fatalf("replay: message %d: %v", seq, err)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != p.EventID {
			t.Errorf("message %d: Nats-Msg-Id %q, event id %q; want the same", seq, id, p.EventID)
		}
		out = append(out, p)
	}
	return out
}
