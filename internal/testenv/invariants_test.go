package testenv_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// failRecorder is a testing.TB that records failures instead of reporting
// them; Fatal ends the calling goroutine, as testing's does.
type failRecorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *failRecorder) Helper() {}

func (r *failRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *failRecorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.FailNow()
}

func (r *failRecorder) FailNow() { runtime.Goexit() }

// A query of CheckInvariants that fails fails the test: a table it cannot
// read must not read as zero rows that agree with a SKU that sold nothing.
func TestCheckInvariants_FailsOnQueryError(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	if err := db.Exec("INSERT INTO skus (name, total_stock, stock, created_at, updated_at) VALUES ('x', 3, 3, NOW(6), NOW(6))").Error; err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.Raw("SELECT id FROM skus").Row().Scan(&id); err != nil {
		t.Fatal(err)
	}
	if sold := testenv.CheckInvariants(t, db, id); sold != 0 {
		t.Fatalf("CheckInvariants on an untouched sku = %d; want 0", sold)
	}
	for _, q := range []string{"DROP TABLE user_purchases", "DROP TABLE orders"} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	r := &failRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testenv.CheckInvariants(r, db, id)
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatal("CheckInvariants passed a sku whose orders table is gone; want a failure")
	}
}

// CheckInvariants runs the audit on MariaDB: an order pending but settled,
// which its own queries do not look at, fails the test naming the
// audit's invariant.
func TestCheckInvariants_RunsTheAudit(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	for _, q := range []string{
		"INSERT INTO skus (id, name, total_stock, stock, sold, per_user_limit, created_at, updated_at) VALUES (1, 'x', 3, 2, 1, 1, NOW(6), NOW(6))",
		"INSERT INTO orders (sku_id, user_id, quantity, created_at, status, expires_at) VALUES (1, 'a', 1, NOW(6), 'pending', NOW(6) + INTERVAL 1 HOUR)",
		"INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES (1, 'a', 1, 1)",
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	testenv.CheckInvariants(t, db, 1) // clean
	if err := db.Exec("UPDATE orders SET settled_at = NOW(6)").Error; err != nil {
		t.Fatal(err)
	}
	r := &failRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testenv.CheckInvariants(r, db, 1)
	}()
	<-done
	if len(r.failed) != 1 || !strings.Contains(r.failed[0], "settled_once") {
		t.Fatalf("CheckInvariants of a pending order settled failed %q; want the audit's settled_once alone", r.failed)
	}
}
