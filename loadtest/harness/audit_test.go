package harness

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// TestRunAudit: the run's final audit passes a consistent sale and names
// the SKU and invariant of a tampered one, as a violation and an event.
func TestRunAudit(t *testing.T) {
	t.Parallel()
	db, err := testenv.DB(t, testenv.Database(t)).DB()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO skus (id, name, total_stock, stock, sold, created_at, updated_at) VALUES (7, 'lt', 3, 2, 1, NOW(6), NOW(6))",
		"INSERT INTO orders (sku_id, user_id, quantity, created_at, status) VALUES (7, 'u', 1, NOW(6), 'paid')",
		"INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (7, 'u', 1, 1)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r := &run{db: db, log: io.Discard}
	if got := r.audit(t.Context()); len(got) != 0 {
		t.Fatalf("audit of a consistent sale = %q; want nothing", got)
	}
	if _, err := db.Exec("DELETE FROM user_purchases WHERE sku_id = 7"); err != nil {
		t.Fatal(err)
	}
	got := r.audit(t.Context())
	if len(got) != 1 || !strings.HasPrefix(got[0], "sku 7 holdings_match_orders: ") {
		t.Errorf("audit after a lost holding = %q; want sku 7 holdings_match_orders", got)
	}
	if v := violationsOf(AuditFailed, got...); len(v) != 1 || v[0].Name != AuditFailed {
		t.Errorf("violations = %+v; want one named %s", v, AuditFailed)
	}
	if !slices.ContainsFunc(r.events, func(e event) bool { return strings.Contains(e.What, "sku 7 holdings_match_orders") }) {
		t.Errorf("events = %+v; want the audit's failure", r.events)
	}
	if got := (&run{log: io.Discard}).audit(t.Context()); got != nil {
		t.Errorf("audit without the runner's database = %q; want nothing (target mode)", got)
	}
}
