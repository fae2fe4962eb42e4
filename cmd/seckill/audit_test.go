package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// auditRun runs `seckill args...` against dsn and returns its exit status
// and output.
func auditRun(t *testing.T, dsn string, args ...string) (int, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, env(map[string]string{"SECKILL_MYSQL_DSN": dsn}), &stdout, &stderr)
	return exitCode(err), stdout.String(), err
}

// sellSKU sells 3 of 5 units through the repository, one pending order
// per buyer and one more cancelled, and returns the SKU's id.
func sellSKU(t *testing.T, s *repository.MySQL, name string) int64 {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	sku, err := s.CreateSKU(ctx, service.SKU{Name: name, TotalStock: 5, Stock: 5, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	b := service.Batch{SKUID: sku.ID, Now: now, PaymentTimeout: time.Hour}
	for _, u := range []string{"a", "b", "c", "d"} {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: sku.ID, UserID: u, Quantity: 1, IdempotencyKey: name + "-" + u})
	}
	res, err := s.CommitBatch(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Outcomes {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	if _, err := s.CancelOrder(ctx, res.Outcomes[3].Placed.Order.ID, "d", now); err != nil {
		t.Fatal(err)
	}
	return sku.ID
}

// TestAuditCommand: after a clean sale the audit exits 0, as a table and
// as JSON, for every SKU or one; each tampering makes it exit 1 naming the
// SKU and the invariant, in the table, the JSON and the error.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	db := testenv.DB(t, dsn)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	s := repository.NewMySQL(db)
	first, second := sellSKU(t, s, "first"), sellSKU(t, s, "second")

	code, out, err := auditRun(t, dsn, "audit")
	if code != 0 {
		t.Fatalf("audit after a clean sale = exit %d (%v):\n%s", code, err, out)
	}
	// Each count says what it counts: orders (by status) or units.
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	for _, want := range []string{"PENDING_ORDERS", "PAID_ORDERS", "CANCELLED_ORDERS", "EXPIRED_ORDERS", "WAITING_ORDERS", "LAPSED_ORDERS", "LIVE_UNITS", "HELD_UNITS"} {
		if !slices.Contains(header, want) {
			t.Errorf("audit header %q: no %s", header, want)
		}
	}
	for _, bare := range []string{"PENDING", "PAID", "CANCELLED", "EXPIRED", "WAITING", "LAPSED"} {
		if slices.Contains(header, bare) {
			t.Errorf("audit header %q: %s does not say whether it counts orders or units", header, bare)
		}
	}
	for _, id := range []int64{first, second} {
		row := tableRow(out, id)
		if !strings.HasSuffix(row, " OK") || !strings.Contains(row, " 5 ") {
			t.Errorf("row of sku %d = %q; want its counts and OK\n%s", id, row, out)
		}
	}

	code, out, _ = auditRun(t, dsn, "audit", "-json", "-sku", strconv.FormatInt(second, 10))
	var doc struct {
		SKUs []struct {
			SKU      int64                  `json:"sku"`
			Sold     int64                  `json:"sold"`
			Pending  struct{ Orders int64 } `json:"pending"`
			Failures []struct{ Invariant, Detail string }
		} `json:"skus"`
		Audited, Failed int
		OK              bool
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, out)
	}
	if code != 0 || len(doc.SKUs) != 1 || doc.SKUs[0].SKU != second || doc.SKUs[0].Sold != 3 || doc.SKUs[0].Pending.Orders != 3 ||
		doc.Audited != 1 || doc.Failed != 0 || !doc.OK || doc.SKUs[0].Failures == nil {
		t.Errorf("audit -json -sku %d = exit %d, %+v; want that SKU alone, 3 sold in 3 pending orders, OK", second, code, doc)
	}
	for _, key := range []string{`"pending":{`, `"waiting":{`, `"lapsed":{`, `"allotted":{`, `"waiters":0`, `"held_units":3`} {
		if !strings.Contains(out, key) {
			t.Errorf("audit -json has no %s:\n%s", key, out)
		}
	}

	tampers := []struct {
		name, invariant string
		sql             string
	}{
		{"stock", "units_have_orders", "UPDATE skus SET stock = stock - 1, sold = sold + 1 WHERE id = %d"},
		{"an order's status", "units_have_orders", "UPDATE orders SET status = 'cancelled', settled_at = NOW(6) WHERE sku_id = %d AND user_id = 'a'"},
		{"a holding", "no_orphan_holding", "INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (%d, 'd', 1, 1)"},
		{"a user over the limit", "within_limit", "UPDATE orders SET user_id = 'b' WHERE sku_id = %d AND user_id = 'a'"},
	}
	var tampered []int64
	for _, tc := range tampers {
		t.Run(tc.name, func(t *testing.T) {
			id := sellSKU(t, s, tc.name)
			tampered = append(tampered, id)
			if _, err := sqlDB.Exec(fmt.Sprintf(tc.sql, id)); err != nil {
				t.Fatal(err)
			}
			sku := strconv.FormatInt(id, 10)
			code, out, err := auditRun(t, dsn, "audit", "-sku", sku)
			if code != 1 || !strings.Contains(tableRow(out, id), tc.invariant) ||
				!strings.Contains(out, "sku "+sku+" "+tc.invariant+": ") || err == nil || !strings.Contains(err.Error(), "sku "+sku+" (") {
				t.Errorf("audit -sku %s after tampering with %s = exit %d, %v; want 1 naming sku %s and %s:\n%s", sku, tc.name, code, err, sku, tc.invariant, out)
			}
			code, out, _ = auditRun(t, dsn, "audit", "-json", "-sku", sku)
			if code != 1 || !json.Valid([]byte(out)) || !strings.Contains(out, `"invariant":"`+tc.invariant+`"`) {
				t.Errorf("audit -json -sku %s = exit %d; want 1 and a valid document naming %s:\n%s", sku, code, tc.invariant, out)
			}
		})
	}

	code, out, err = auditRun(t, dsn, "audit")
	if code != 1 || err == nil {
		t.Fatalf("audit of all = exit %d, %v; want 1", code, err)
	}
	if !strings.HasSuffix(tableRow(out, first), " OK") {
		t.Errorf("the untouched sku %d is not OK:\n%s", first, out)
	}
	for _, id := range tampered {
		if !strings.Contains(err.Error(), fmt.Sprintf("sku %d (", id)) || !strings.Contains(tableRow(out, id), "FAIL ") {
			t.Errorf("audit of all does not name sku %d: %v\n%s", id, err, out)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("audited %d SKUs: 2 OK, %d failed", 2+len(tampered), len(tampered))) {
		t.Errorf("no summary line:\n%s", out)
	}
}

// tableRow returns the table row of sku id.
func tableRow(out string, id int64) string {
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == strconv.FormatInt(id, 10) {
			return strings.TrimRight(line, "\n")
		}
	}
	return ""
}

// TestAuditCommand_UsageAndConnection: help exits 0; bad flags, a missing
// or unreachable database, an unknown SKU, and a database with nothing to
// audit (no schema, no SKU: a wrong DSN must not pass for a clean sale)
// exit 2.
func TestAuditCommand_UsageAndConnection(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	empty, _ := emptyDatabase(t)
	code, out, err := auditRun(t, "", "audit", "-h")
	if code != 0 || !strings.Contains(out, "seckill audit [-sku N] [-json]") {
		t.Errorf("audit -h = exit %d, %v:\n%s", code, err, out)
	}
	for _, tc := range []struct {
		name string
		dsn  string
		args []string
		want string
	}{
		{"bad flag", dsn, []string{"audit", "-sku", "x"}, "invalid value"},
		{"negative sku", dsn, []string{"audit", "-sku", "-3"}, "-sku -3"},
		{"sku 0", dsn, []string{"audit", "-sku", "0"}, "-sku 0"},
		{"argument", dsn, []string{"audit", "all"}, `unexpected argument "all"`},
		{"no dsn", "", []string{"audit"}, "SECKILL_MYSQL_DSN"},
		{"unreachable", "root@tcp(127.0.0.1:1)/nowhere", []string{"audit"}, "audit: database: open mysql"},
		{"unknown sku", dsn, []string{"audit", "-sku", "404"}, "sku not found: 404"},
		{"no sku at all", dsn, []string{"audit"}, "no SKU to audit"},
		{"no schema", empty, []string{"audit"}, "no seckill schema"},
		{"no schema, one sku", empty, []string{"audit", "-sku", "1"}, "no seckill schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, err := auditRun(t, tc.dsn, tc.args...)
			if code != 2 || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("seckill %s = exit %d, %v; want 2 and %q", strings.Join(tc.args, " "), code, err, tc.want)
			}
			if out != "" {
				t.Errorf("seckill %s printed %q besides the error; want only the error", strings.Join(tc.args, " "), out)
			}
		})
	}
}

// TestAuditCommand_Outbox: with events on, the whole audit also audits
// the order events' outbox: a clean sale's passes, as a table and as
// JSON; an event of an order that does not exist, in no SKU, exits 1
// naming events_have_orders, though every SKU is OK.
func TestAuditCommand_Outbox(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	db := testenv.DB(t, dsn)
	s := repository.NewMySQL(db, repository.WithEvents())
	sellSKU(t, s, "events")
	audit := func(args ...string) (int, string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"audit"}, args...),
			env(map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_EVENTS_ENABLED": "true"}), &stdout, &stderr)
		return exitCode(err), stdout.String(), err
	}
	code, out, err := audit()
	if code != 0 || !strings.Contains(out, "order events' outbox: ") || !strings.Contains(out, " events: OK") {
		t.Fatalf("audit with events after a clean sale = exit %d (%v); want 0 and the outbox OK:\n%s", code, err, out)
	}
	if err := db.Exec("INSERT INTO order_events (event_id, order_id, last_order_id, type, status, at) SELECT MD5(RAND()), MAX(id) + 1000, MAX(id) + 1000, 'paid', 'paid', UTC_TIMESTAMP(6) FROM orders").Error; err != nil {
		t.Fatal(err)
	}
	code, out, err = audit()
	if code != 1 || err == nil || !strings.Contains(err.Error(), "events_have_orders") || !strings.Contains(out, "FAIL events_have_orders: 1 of ") ||
		!strings.Contains(out, "audited 1 SKUs: 1 OK, 0 failed") {
		t.Errorf("audit with an event of no order = exit %d, %v; want 1 naming events_have_orders, the SKU OK:\n%s", code, err, out)
	}
	code, out, _ = audit("-json")
	var doc struct {
		Outbox *struct {
			Rows, Events int64
			Failures     []struct{ Invariant string }
		}
		OK bool
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || doc.OK || doc.Outbox == nil ||
		len(doc.Outbox.Failures) != 1 || doc.Outbox.Failures[0].Invariant != "events_have_orders" {
		t.Errorf("audit -json with an event of no order = exit %d, %+v (%v); want 1, not ok, the outbox naming events_have_orders:\n%s", code, doc, err, out)
	}
}
