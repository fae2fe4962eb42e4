package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/audit"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// TestAudit_Events: with WithEvents, a sale in every lifecycle state
// written with events passes, each of its orders checked; an event row
// deleted (a committed change without its event) or one added (an event
// of a change that never committed) fails EventsTellChanges, naming the
// order, and only with WithEvents. Orders older than the retention are
// not checked: their events may be pruned.
func TestAudit_Events(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		breach string // SQL run on the sale; ? is the order's id
		order  string // the user whose order is named
	}{
		{"clean", "", ""},
		{"a paid event deleted", "DELETE FROM order_events WHERE type = 'paid'", "d"},
		{"a created event deleted", "DELETE FROM order_events WHERE type = 'created' AND order_id = ?", "c"},
		{"an expired event deleted", "DELETE FROM order_events WHERE type = 'expired'", "e"},
		{"a cancelled order's last event deleted", "DELETE FROM order_events WHERE type = 'cancelled'", "c"},
		{"a run cut short", "UPDATE order_events SET last_order_id = last_order_id - step WHERE last_order_id > order_id", "h"},
		{"a run's order paid without its event", "UPDATE orders SET status = 'paid', settled_at = created_at WHERE id = ?", "g"},
		{"an event of a change that never committed", "INSERT INTO order_events (event_id, order_id, last_order_id, type, status, at) SELECT MD5(RAND()), id, id, 'paid', 'paid', created_at FROM orders WHERE id = ?", "c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, sqlDB, sku, ids := eventSale(t)
			if tc.breach != "" {
				var args []any
				if tc.order != "" && strings.Contains(tc.breach, "?") {
					args = append(args, ids[tc.order][0])
				}
				if err := db.Exec(tc.breach, args...).Error; err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			r, err := audit.SKU(ctx, sqlDB, sku, audit.WithEvents(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if r.EventOrders != 9 {
				t.Errorf("%d orders' events checked; want the sale's 9", r.EventOrders)
			}
			want := []audit.Invariant{}
			if tc.breach != "" {
				want = []audit.Invariant{audit.EventsTellChanges}
			}
			if got := r.Failed(); !slices.Equal(got, want) {
				t.Fatalf("audit with events = %v %+v; want %v", got, r.Failures, want)
			}
			if tc.breach != "" && !strings.Contains(r.Failures[0].Detail, fmt.Sprintf("order %d first", ids[tc.order][0])) {
				t.Errorf("the failure %q does not name order %d (%s's)", r.Failures[0].Detail, ids[tc.order][0], tc.order)
			}
			if off, err := audit.SKU(ctx, sqlDB, sku); err != nil || !off.OK() || off.EventOrders != 0 {
				t.Errorf("audit without events = %+v, %v; want no failure, no order's events checked", off, err)
			}
			// e was created two minutes before: out of a 90 s retention's reach.
			if short, err := audit.SKU(ctx, sqlDB, sku, audit.WithEvents(90*time.Second)); err != nil || short.EventOrders != 8 {
				t.Errorf("audit with a retention of 90s checked %d orders' events (%v); want 8 (all but e)", short.EventOrders, err)
			}
		})
	}
}

// eventSale is a sale in every lifecycle state, written with events, on
// a database of its own, then f, g and h's orders in one batch (a run).
func eventSale(t *testing.T) (*gorm.DB, *sql.DB, int64, map[string][]int64) {
	t.Helper()
	db := testenv.DB(t, testenv.Database(t))
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	s := repository.NewMySQL(db, repository.WithEvents())
	sku, ids := sale(t, s, time.Now().UTC())
	batch(t, s, sku, ids, "f", "g", "h")
	return db, sqlDB, sku, ids
}

// batch sells one unit to each of users in one batch: one run of events.
func batch(t *testing.T, s *repository.MySQL, sku int64, ids map[string][]int64, users ...string) {
	t.Helper()
	b := service.Batch{SKUID: sku, Now: time.Now().UTC(), PaymentTimeout: window}
	for _, u := range users {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: sku, UserID: u, Quantity: 1})
	}
	res, err := s.CommitBatch(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range res.Outcomes {
		if o.Err != nil {
			t.Fatalf("order of %s: %v", users[i], o.Err)
		}
		ids[users[i]] = append(ids[users[i]], o.Placed.Order.ID)
	}
}

// TestAudit_Outbox: the outbox as a whole passes after a sale in every
// state; an event of an order that does not exist fails it (an
// invented event of an order in no SKU, a run reaching past its orders,
// an order deleted under its events), naming the first row, and only
// with WithEvents.
func TestAudit_Outbox(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		breach  string
		missing int
	}{
		{"clean", "", 0},
		{"an event of an order that never existed", "INSERT INTO order_events (event_id, order_id, last_order_id, type, status, at) SELECT MD5(RAND()), MAX(id) + 1000, MAX(id) + 1000, 'paid', 'paid', UTC_TIMESTAMP(6) FROM orders", 1},
		{"a run reaching past its orders", "UPDATE order_events SET last_order_id = last_order_id + 2 * step WHERE last_order_id > order_id", 2},
		{"an order deleted under its events", "DELETE FROM orders WHERE user_id = 'g'", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, sqlDB, _, _ := eventSale(t)
			if tc.breach != "" {
				// The checks that would refuse the breach are the
				// audit's to find: off for this session only.
				if err := db.Exec("SET SESSION foreign_key_checks = 0, check_constraint_checks = 0; " + tc.breach).Error; err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			r, err := audit.Outbox(ctx, sqlDB, audit.WithEvents(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if r.Rows == 0 || r.Events < 9 {
				t.Errorf("%d rows, %d events read; want the sale's", r.Rows, r.Events)
			}
			if tc.missing == 0 {
				if !r.OK() {
					t.Fatalf("a clean outbox fails: %+v", r.Failures)
				}
			} else if len(r.Failures) != 1 || r.Failures[0].Invariant != audit.EventsHaveOrders ||
				!strings.HasPrefix(r.Failures[0].Detail, fmt.Sprintf("%d of %d events", tc.missing, r.Events)) {
				t.Fatalf("failures %+v; want %s, %d events missing their orders", r.Failures, audit.EventsHaveOrders, tc.missing)
			}
			// Read a row a snapshot, every page after the last: the same.
			if paged, err := audit.OutboxPaged(ctx, sqlDB, 1, audit.WithEvents(time.Hour)); err != nil ||
				paged.Rows != r.Rows || paged.Events != r.Events || !slices.Equal(paged.Failures, r.Failures) {
				t.Errorf("the outbox a row a snapshot = %+v, %v; want %+v", paged, err, r)
			}
			if off, err := audit.Outbox(ctx, sqlDB); err != nil || !off.OK() || off.Rows != 0 {
				t.Errorf("the outbox audited without events = %+v, %v; want nothing read", off, err)
			}
		})
	}
}
