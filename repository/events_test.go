package repository_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// The outbox (docs/design.md, invariant 21): with events on, every
// committed change of an order has exactly one event, written in its
// transaction; nothing else has one. Off, nothing is written.

var eventBackends = []backend{
	{"mariadb", func(t *testing.T) (*gorm.DB, store) {
		db, _ := openMariaDB(t)
		return db, repository.NewMySQL(db, repository.WithPaymentTimeout(window), repository.WithEvents())
	}},
	{"sqlite", func(t *testing.T) (*gorm.DB, store) {
		db, _ := openSQLite(t)
		return db, repository.NewSQLite(db, repository.WithPaymentTimeout(window), repository.WithEvents())
	}},
}

func TestEvents_OnePerCommittedChange(t *testing.T) {
	t.Parallel()
	for _, be := range eventBackends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			ctx := context.Background()
			ends := time.Now().UTC().Add(window / 2).Truncate(time.Microsecond)
			sku := newSaleSKU(t, s, 4, 1, &ends)
			created := time.Now().UTC().Truncate(time.Microsecond)
			buyers := pendingOrders(t, s, sku.ID, created, "a", "b", "c")
			first, err := s.CommitBatch(ctx, batch(sku.ID, 0, "d"))
			if err != nil || first.Outcomes[0].Err != nil {
				t.Fatalf("d's order: %+v, %v", first, err)
			}
			ws := waiting(t, line(t, s, sku.ID, 100, "w0", "w1", "w2"))

			// A batch decided on a stale known row writes (with its
			// events, on MySQL) and is rolled back, then decided again.
			if _, _, err := s.SetStock(ctx, sku.ID, 0); err != nil {
				t.Fatal(err)
			}
			stale := first.SKU
			b := batch(sku.ID, 0, "e")
			b.Known = &stale
			if res, err := s.CommitBatch(ctx, b); err != nil || !errors.Is(res.Outcomes[0].Err, service.ErrSoldOut) {
				t.Fatalf("e's order on a stale row = %+v, %v; want sold out", res, err)
			}

			// Each change at most once, whoever asks how often.
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 4 {
				wg.Add(3)
				go func() { defer wg.Done(); <-start; _, _ = s.PayOrder(ctx, buyers[0].ID, created) }()
				go func() { defer wg.Done(); <-start; _, _ = s.CancelOrder(ctx, buyers[1].ID, "b", created) }() // w0 gets the unit
				go func() { defer wg.Done(); <-start; _, _ = s.CancelOrder(ctx, ws[1].ID, "w1", created) }()
			}
			close(start)
			wg.Wait()
			if _, err := s.PayOrder(ctx, buyers[2].ID, created.Add(2*window)); !errors.Is(err, service.ErrOrderExpired) {
				t.Fatalf("paying a due order = %v; want ErrOrderExpired", err)
			}
			// The sweep: c and w0 (pending since allotted) expire, w2 lapses.
			ex, err := s.ExpireDue(ctx, service.ExpiryRun{Now: time.Now().UTC().Add(2 * window), Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if ex.Orders != 2 || ex.Lapsed != 1 {
				t.Fatalf("sweep = %d expired, %d lapsed; want 2 (c, w0; d was paid at creation) and 1 (w2)", ex.Orders, ex.Lapsed)
			}
			evs := testenv.CheckEvents(t, db)
			read, err := s.(interface {
				Unpublished(context.Context, int) ([]service.OrderEvent, error)
			}).Unpublished(ctx, 100)
			if err != nil || len(read) != len(evs) {
				t.Errorf("the relay's read = %d events, %v; want the outbox's %d", len(read), err, len(evs))
			}
			for i := range min(len(read), len(evs)) {
				if read[i].EventID != evs[i].EventID || read[i].At.IsZero() || read[i].UserID == "" {
					t.Errorf("the relay's event %d = %+v; want the outbox's %+v, with its time and buyer", i, read[i], evs[i])
				}
			}
			count := map[service.EventType]int{}
			for _, e := range evs {
				count[e.Type]++
			}
			want := map[service.EventType]int{service.EventCreated: 7, service.EventPaid: 1, service.EventCancelled: 2,
				service.EventAllocated: 1, service.EventExpired: 2, service.EventLapsed: 1}
			for typ, n := range want {
				if count[typ] != n {
					t.Errorf("%d %s events; want %d (all: %v)", count[typ], typ, n, count)
				}
			}
		})
	}
}

func TestEvents_OffWritesNothing(t *testing.T) {
	t.Parallel()
	for _, be := range waitlistBackends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			db, s := be.open(t)
			ctx := context.Background()
			sku := newSaleSKU(t, s, 2, 1, nil)
			created := time.Now().UTC().Truncate(time.Microsecond)
			placed := pendingOrders(t, s, sku.ID, created, "a", "b")
			waiting(t, line(t, s, sku.ID, 100, "w0"))
			if _, err := s.PayOrder(ctx, placed[0].ID, created); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CancelOrder(ctx, placed[1].ID, "b", created); err != nil {
				t.Fatal(err)
			}
			var n int64
			if err := db.Raw("SELECT COUNT(*) FROM order_events").Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d events with events off; want none", n)
			}
		})
	}
}

// TestEvents_ABatchIsARowPerRun: a round's new orders are told by one
// outbox row per run of them created with one status, whatever SKU and
// batch they belong to, its orders step apart, cut so that no row spans
// more than service.MaxRunSpan ids; expanded, the rows are exactly the
// orders' created events (testenv.CheckEvents), and the relay's read
// fills each in from its order, its time its order's creation.
func TestEvents_ABatchIsARowPerRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		step, rows int64
	}{
		{1, 2},     // the pending run (both SKUs) and the waiting run
		{3, 2},     // a Galera node's step
		{40000, 4}, // two orders a row: pending 2+2+1, waiting 2
	} {
		t.Run(fmt.Sprintf("step %d", tc.step), func(t *testing.T) {
			t.Parallel()
			mc, err := mysql.ParseDSN(testenv.Database(t))
			if err != nil {
				t.Fatal(err)
			}
			mc.Params = map[string]string{"auto_increment_increment": fmt.Sprint(tc.step)} // this session's only
			db := testenv.DB(t, mc.FormatDSN())
			s := repository.NewMySQL(db, repository.WithPaymentTimeout(window), repository.WithEvents())
			ctx := context.Background()
			// Two SKUs' batches, a millisecond apart, in one round: the
			// first sells out and its last two buyers wait; the second's
			// buyers all get a unit.
			second := newSaleSKU(t, s, 10, 1, nil) // the lower id: its batch's orders first
			first := newSaleSKU(t, s, 3, 1, nil)
			now := time.Now().UTC().Truncate(time.Microsecond)
			b1 := service.Batch{SKUID: first.ID, Now: now, PaymentTimeout: window, WaitlistMax: waitlistMax}
			for i, u := range []string{"a", "b", "c", "w0", "w1"} {
				b1.Requests = append(b1.Requests, service.OrderRequest{SKUID: first.ID, UserID: u, Quantity: 1, Wait: true, Arrival: int64(i + 1)})
			}
			b2 := batch(second.ID, 0, "d", "e")
			b2.Now, b2.PaymentTimeout = now.Add(time.Millisecond), window
			res, err := s.CommitRound(ctx, []service.Batch{b2, b1})
			if err != nil {
				t.Fatal(err)
			}
			var placed []service.Order
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				for _, o := range r.Outcomes {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					placed = append(placed, o.Placed.Order)
				}
			}
			var rows int64
			if err := db.Raw("SELECT COUNT(*) FROM order_events").Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if rows != tc.rows {
				t.Errorf("%d event rows for a round of 5 pending and 2 waiting orders at step %d; want %d", rows, tc.step, tc.rows)
			}
			evs := testenv.CheckEvents(t, db)
			if len(evs) != len(placed) {
				t.Fatalf("%d events for %d orders", len(evs), len(placed))
			}
			got, err := s.Unpublished(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			byOrder := map[int64]service.OrderEvent{}
			for _, e := range got {
				byOrder[e.OrderID] = e
			}
			for _, o := range placed {
				e := byOrder[o.ID]
				if !e.At.Equal(o.CreatedAt) {
					t.Errorf("order %d's event at %v; want its creation, %v", o.ID, e.At, o.CreatedAt)
				}
				e.At = o.CreatedAt
				want := service.OrderEvent{ID: e.ID, EventID: e.EventID, Type: service.EventCreated, OrderID: o.ID, SKUID: o.SKUID,
					UserID: o.UserID, Quantity: 1, Status: o.Status, At: o.CreatedAt}
				if e != want {
					t.Errorf("order %d's event = %+v; want %+v", o.ID, e, want)
				}
			}
			ids := make([]int64, len(placed))
			for i, o := range placed {
				ids[i] = o.ID
			}
			slices.Sort(ids)
			for i := 1; i < len(ids); i++ {
				if ids[i]-ids[i-1] != tc.step {
					t.Errorf("orders %d and %d of one round at step %d", ids[i-1], ids[i], tc.step)
				}
			}
		})
	}
}
