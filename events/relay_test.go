package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

const (
	subject = "test.orders"
	stream  = "TEST_ORDERS"
)

// watch records what the relay tells its observer.
type watch struct {
	mu        sync.Mutex
	backlog   int64
	oldest    time.Duration
	maxLog    int64
	maxOldest time.Duration
	failed    int
	published atomic.Int64
}

func (w *watch) Published(n int)  { w.published.Add(int64(n)) }
func (w *watch) PublishFailed()   { w.mu.Lock(); w.failed++; w.mu.Unlock() }
func (w *watch) RelayLeader(bool) {}
func (w *watch) Backlog(n int64, oldest time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.backlog, w.oldest = n, oldest
	w.maxLog, w.maxOldest = max(w.maxLog, n), max(w.maxOldest, oldest)
}

func (w *watch) now() (backlog int64, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.backlog, w.failed
}

// TestRelay_BrokerDownThenBack: orders sell, are paid and cancelled while
// the broker is killed; the backlog and its age grow and show; once the
// broker is back everything is published, and the stream replayed from
// its start, deduplicated by event id, holds exactly the outbox's events,
// each order's in the order they happened.
func TestRelay_BrokerDownThenBack(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	store := repository.NewMySQL(db, repository.WithPaymentTimeout(time.Minute), repository.WithEvents())
	ns, ids, pub := broker(t, time.Minute)
	obs := &watch{}
	relay := events.NewRelay(store, pub, nil, ids, events.Config{Subject: subject, Batch: 50, Interval: 10 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond, PublishTimeout: 500 * time.Millisecond, Retention: time.Hour}, testenv.Logger(), obs)
	ctx := context.Background()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })

	now := time.Now().UTC()
	sku, err := store.CreateSKU(ctx, service.SKU{Name: "t", TotalStock: 1e6, Stock: 1e6, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	round := 0
	sell := func() { round++; sell(t, store, sku.ID, round) }
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("30s and still not %s", what)
			}
			sell() // the sale goes on meanwhile
		}
	}
	until("anything published", func() bool { return obs.published.Load() > 0 })

	ns.Stop()
	until("a failed round and a backlog", func() bool { n, f := obs.now(); return f > 0 && n > 0 })
	for range 5 {
		sell()
	}
	until("a backlog of at least 100 seen", func() bool { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.maxLog >= 100 && obs.maxOldest > 0 })
	ns.Start()
	for range 5 { // the sale goes on after the broker's return
		sell()
	}
	// Then the relay catches up: polled without selling, or a busy box's
	// relay could trail a sale that never pauses.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := obs.now(); n == 0 && obs.published.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			n, f := obs.now()
			t.Fatalf("30s after the broker's return the backlog is %d (%d failed rounds)", n, f)
		}
	}
	cancel()
	<-done
	for range 3 { // not relayed: the outbox keeps them for the next relay
		sell()
	}

	outbox := testenv.CheckEvents(t, db)
	got := replay(t, ns.URL)
	var published []testenv.Event
	for i, e := range outbox {
		if e.Published {
			published = append(published, e)
		} else if i+1 < len(outbox) && outbox[i+1].Published && outbox[i+1].ID != e.ID {
			t.Errorf("event row %d is unpublished before published row %d: the relay publishes in id order", e.ID, outbox[i+1].ID)
		}
	}
	inStream := map[string]bool{}
	for _, p := range got {
		inStream[p.EventID] = true
	}
	seq := map[string]int64{} // each event's place in the outbox
	for _, e := range outbox {
		seq[e.EventID] = e.ID
	}
	for _, e := range published {
		if !inStream[e.EventID] {
			t.Errorf("event %d (order %d %s) is not in the stream", e.ID, e.OrderID, e.Type)
		}
	}
	if len(got) != len(published) {
		t.Errorf("stream holds %d distinct events; the outbox published %d (of %d): one that never committed, or twice under two ids", len(got), len(published), len(outbox))
	}
	// Each order's events in the stream in the order of its changes.
	lastOf := map[string]int64{}
	for _, p := range got {
		id := seq[p.EventID]
		if prev, ok := lastOf[p.OrderID]; ok && prev > id {
			t.Errorf("order %s: event %d after event %d in the stream", p.OrderID, id, prev)
		}
		lastOf[p.OrderID] = id
		if _, ok := ids.Decode(p.OrderID); !ok {
			t.Errorf("event %s carries order id %q, not one shoppers see", p.EventID, p.OrderID)
		}
	}
	t.Logf("%d events, %d republished, max backlog %d, oldest %v", len(published), obs.published.Load()-int64(len(published)), obs.maxLog, obs.maxOldest)
}

// broker starts a private nats-server and returns it, an order id codec
// and a publisher to the test stream with duplicate window dup.
func broker(t testing.TB, dup time.Duration) (*testenv.NATSServer, *orderid.Codec, *events.JetStream) {
	t.Helper()
	ns := testenv.StartNATS(t)
	key, _ := orderid.ParseKey(orderid.RandomKey())
	ids, err := orderid.New(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := events.NewJetStream(ns.URL, events.StreamConfig{Name: stream, Subject: subject, Duplicate: dup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	return ns, ids, pub
}

// sell sells 10 orders of sku in one batch, pays one and cancels one.
func sell(t *testing.T, store *repository.MySQL, sku int64, round int) {
	t.Helper()
	ctx := context.Background()
	b := service.Batch{SKUID: sku, Now: time.Now().UTC(), PaymentTimeout: time.Minute}
	for i := range 10 {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: sku, UserID: fmt.Sprintf("u%d-%d", round, i), Quantity: 1})
	}
	res, err := store.CommitBatch(ctx, b)
	if err != nil {
		t.Fatalf("batch %d: %v", round, err)
	}
	for _, o := range res.Outcomes {
		if o.Err != nil {
			t.Fatalf("batch %d: %v", round, o.Err)
		}
	}
	o0, o1 := res.Outcomes[0].Placed.Order, res.Outcomes[1].Placed.Order
	if _, err := store.PayOrder(ctx, o0.ID, time.Now().UTC()); err != nil {
		t.Fatalf("pay %+v: %v", o0, err)
	}
	if _, err := store.CancelOrder(ctx, o1.ID, o1.UserID, time.Now().UTC()); err != nil {
		t.Fatalf("cancel %+v: %v", o1, err)
	}
}

// TestRelay_ARecreatedDatabaseLosesNoEvent: a database recreated, or
// restored from a backup, numbers its outbox rows from 1 again; the
// events of a sale on it, published to the same stream within its
// duplicate window, are all stored, none dropped as a copy of an event
// of the database before (the event id is random, not the row's number).
func TestRelay_ARecreatedDatabaseLosesNoEvent(t *testing.T) {
	t.Parallel()
	ns, ids, pub := broker(t, time.Hour)
	ctx := context.Background()
	var outbox []testenv.Event
	for life := range 2 { // the database, then the same recreated empty
		db := testenv.DB(t, testenv.Database(t))
		store := repository.NewMySQL(db, repository.WithPaymentTimeout(time.Minute), repository.WithEvents())
		now := time.Now().UTC()
		sku, err := store.CreateSKU(ctx, service.SKU{Name: "t", TotalStock: 100, Stock: 100, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		for round := range 3 {
			sell(t, store, sku.ID, round)
		}
		relay := events.NewRelay(store, pub, nil, ids, events.Config{Subject: subject, Batch: 50, Interval: time.Millisecond,
			MaxBackoff: time.Millisecond, PublishTimeout: 5 * time.Second, Retention: time.Hour}, testenv.Logger(), nil)
		for more := true; more; {
			if more, err = relay.Round(ctx, 0); err != nil {
				t.Fatalf("database %d: relay round: %v", life, err)
			}
		}
		if n, _, err := store.Backlog(ctx); err != nil || n != 0 {
			t.Fatalf("database %d: backlog %d, %v after relaying it all; want 0", life, n, err)
		}
		outbox = append(outbox, testenv.CheckEvents(t, db)...)
	}
	got := replay(t, ns.URL)
	inStream := map[string]bool{}
	for _, p := range got {
		inStream[p.EventID] = true
	}
	lost := 0
	for _, e := range outbox {
		if !inStream[e.EventID] {
			lost++
		}
	}
	if lost > 0 || len(got) != len(outbox) {
		t.Errorf("the stream holds %d events of the two databases' %d; %d never stored (dropped as duplicates of the first database's?)", len(got), len(outbox), lost)
	}
}

// replay reads the stream from its first message, deduplicated by event
// id, in stream order.
func replay(t *testing.T, url string) []events.Payload {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []events.Payload
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		var p events.Payload
		if err := json.Unmarshal(m.Data, &p); err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Nats-Msg-Id") != p.EventID || m.Subject != subject+"."+string(p.Type) {
			t.Errorf("message %d: id %q subject %s; want the event id %s, subject of its type", seq, m.Header.Get("Nats-Msg-Id"), m.Subject, p.EventID)
		}
		if !seen[p.EventID] {
			seen[p.EventID] = true
			out = append(out, p)
		}
	}
	return out
}
