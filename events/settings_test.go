package events_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// TestRelay_AcceptedSettingsAreSafe draws the relay's settings from the
// ranges internal/config accepts (events.batch 1..10000, publish_timeout
// 10ms..1m, retention 0 and up, duplicate_window 1s..24h; the ends
// themselves first), sells, pays and cancels, then runs the relay's
// rounds until the backlog is empty: the stream replayed and deduplicated
// must be the outbox as it stood before the relay ran, each event at
// least once and nothing else, each order's in order. Interval and max_backoff are only the waits
// between rounds (Run's and lead's sleeps), which these rounds skip.
func TestRelay_AcceptedSettingsAreSafe(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 51))
	logUniform := func(lo, hi time.Duration) time.Duration {
		return time.Duration(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))))
	}
	type drawn struct {
		batch           int
		timeout, retain time.Duration
		duplicate       time.Duration
	}
	cases := []drawn{
		{batch: 1, timeout: 10 * time.Millisecond, retain: 0, duplicate: time.Second},
		{batch: 10000, timeout: time.Minute, retain: time.Hour, duplicate: 24 * time.Hour},
		{batch: 1 + rng.IntN(10000), timeout: logUniform(10*time.Millisecond, time.Minute), retain: time.Duration(rng.Int64N(int64(2 * time.Hour))), duplicate: logUniform(time.Second, 24*time.Hour)},
	}
	for _, d := range cases {
		t.Run(fmt.Sprintf("batch=%d,publish_timeout=%v,retention=%v,duplicate_window=%v", d.batch, d.timeout, d.retain, d.duplicate), func(t *testing.T) {
			db := testenv.DB(t, testenv.Database(t))
			store := repository.NewMySQL(db, repository.WithPaymentTimeout(time.Minute), repository.WithEvents())
			ns, ids, pub := broker(t, d.duplicate)
			ctx := context.Background()
			now := time.Now().UTC()
			sku, err := store.CreateSKU(ctx, service.SKU{Name: "t", TotalStock: 1e6, Stock: 1e6, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			for round := 1; round <= 20; round++ {
				sell(t, store, sku.ID, round)
			}
			outbox := testenv.CheckEvents(t, db) // before any is published, and pruned with retention 0

			obs := &watch{}
			relay := events.NewRelay(store, pub, nil, ids, events.Config{Subject: subject, Batch: d.batch, Interval: 10 * time.Millisecond,
				MaxBackoff: 10 * time.Millisecond, PublishTimeout: d.timeout, Retention: d.retain}, testenv.Logger(), obs)
			deadline := time.Now().Add(time.Minute)
			for rounds := 0; ; rounds++ {
				more, err := relay.Round(ctx, 0)
				if n, _ := obs.now(); err == nil && !more && n == 0 {
					break
				}
				if time.Now().After(deadline) || rounds > 5000 {
					n, failed := obs.now()
					t.Fatalf("after %d rounds the backlog is %d (%d failed rounds; last error %v)", rounds, n, failed, err)
				}
			}

			got := replay(t, ns.URL)
			row := map[string]testenv.Event{}
			for _, e := range outbox {
				row[e.EventID] = e
			}
			seen := map[string]bool{}
			last := map[int64]int64{}
			for _, p := range got { // deduplicated by event id, as a consumer does: a republication past a short window is allowed
				e, ok := row[p.EventID]
				if !ok {
					t.Errorf("the stream's event %s (%s) is not in the outbox", p.EventID, p.Type)
				}
				if seen[p.EventID] {
					continue
				}
				seen[p.EventID] = true
				if prev, ok := last[e.OrderID]; ok && prev > e.ID {
					t.Errorf("order %d: event row %d after row %d in the stream", e.OrderID, e.ID, prev)
				}
				last[e.OrderID] = e.ID
			}
			for _, e := range outbox {
				if !seen[e.EventID] {
					t.Errorf("outbox event %d (order %d %s) is not in the stream", e.ID, e.OrderID, e.Type)
				}
			}
			var left int64
			if err := db.Raw("SELECT COUNT(*) FROM order_events").Scan(&left).Error; err != nil {
				t.Fatal(err)
			}
			if d.retain == 0 && left != 0 {
				t.Errorf("retention 0: %d published events still in the outbox", left)
			}
		})
	}
}
