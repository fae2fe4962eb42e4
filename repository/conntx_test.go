package repository

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

// A round whose UPDATE has already decremented one SKU when the other
// SKU's guard fails (its version moved) must leave nothing behind: not the
// decrement, and not the transaction, open on a pooled connection for the
// next caller to commit by accident. The pool has one connection, so the
// statements after the failed round run on the connection it used.
func TestCommitMySQL_FailedRoundLeavesNoTransactionOpen(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	db := testenv.DB(t, dsn)
	s := New(db)
	s.sql.SetMaxOpenConns(1)
	ctx := context.Background()
	a, b := newSKU(t, s, 10), newSKU(t, s, 10) // a's row is updated first: the lower id

	other, err := testenv.DB(t, dsn).DB()
	if err != nil {
		t.Fatal(err)
	}
	writer, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback()
	if _, err := writer.ExecContext(ctx, "UPDATE skus SET version = version + 1 WHERE id = ?", b.ID); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		ms := []*member{newMember(a.ID, "a1", "a2"), newMember(b.ID, "b1")}
		done <- s.commitMySQL(ctx, ms, 30) // long enough to outwait the writer, whatever the load
	}()
	// The round's UPDATE waits for b's row: the writer commits, and the
	// UPDATE, having changed a's row, finds b's version moved.
	deadline := time.Now().Add(20 * time.Second)
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			t.Fatalf("commitMySQL returned %v before its UPDATE waited for b's row", err)
		default:
		}
		if err := other.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND info LIKE 'UPDATE skus SET stock%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the round's UPDATE never waited for b's row")
		}
		time.Sleep(5 * time.Millisecond) // polling a server-side state, bounded above
	}
	if err := writer.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, service.ErrConflict) {
		t.Fatalf("commitMySQL with b's version moved = %v; want ErrConflict", err)
	}

	var open int
	if err := s.sql.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Fatal("the failed round's transaction is still open on the pooled connection")
	}
	for _, sku := range []service.SKU{a, b} {
		if sold, stock, orders := testenv.SoldAndOrders(t, db, sku.ID); sold != 0 || stock != 10 || orders != 0 {
			t.Errorf("sku %d after the failed round: sold %d, stock %d, %d orders; want 0, 10, 0", sku.ID, sold, stock, orders)
		}
	}
	// The next round, on the same connection, commits exactly its own.
	ms := []*member{newMember(a.ID, "a1")}
	if err := s.commitMySQL(ctx, ms, 30); err != nil || ms[0].err != nil {
		t.Fatalf("next round = %v, %v; want committed", err, ms[0].err)
	}
	if sold, stock, orders := testenv.SoldAndOrders(t, db, a.ID); sold != 1 || stock != 9 || orders != 1 {
		t.Errorf("sku %d after the next round: sold %d, stock %d, %d orders; want 1, 9, 1", a.ID, sold, stock, orders)
	}
}

// The ids of a multi-row INSERT step by the session's
// auto_increment_increment (3 here, as on a multi-master setup), which
// the commit reads once per connection: every order it answers with must
// be the row the database holds for that buyer, whether the batch was
// decided on the reads or on its known row.
func TestCommitMySQL_OrderIDsStepByTheSessionsIncrement(t *testing.T) {
	t.Parallel()
	mc, err := mysql.ParseDSN(testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	mc.Params = map[string]string{"auto_increment_increment": "3"} // SET at connect
	db := testenv.DB(t, mc.FormatDSN())
	s := New(db)
	ctx := context.Background()
	sku := newSKU(t, s, 10)

	first := newMember(sku.ID, "a", "b", "c").b
	res, err := s.CommitBatch(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	second := newMember(sku.ID, "d", "e", "f").b
	second.Known = &res.SKU
	res2, err := s.CommitBatch(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if !res2.ReadsSkipped {
		t.Fatal("the second batch read its row; want it decided on the known row")
	}
	for _, out := range append(res.Outcomes, res2.Outcomes...) {
		o := out.Placed.Order
		if out.Err != nil {
			t.Fatalf("order of %s = %v; want placed", o.UserID, out.Err)
		}
		var user string
		if err := s.sql.QueryRowContext(ctx, "SELECT user_id FROM orders WHERE id = ?", o.ID).Scan(&user); err != nil || user != o.UserID {
			t.Errorf("order %d answered to %s is %q in the database (%v)", o.ID, o.UserID, user, err)
		}
	}
}

// A round sets its lock wait on its connection's session only when the
// session holds another: the wait in force is always the round's, and a
// run of rounds with one wait sends one SET.
func TestCommitMySQL_SetsTheLockWaitOnlyWhenItChanges(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := New(db)
	s.sql.SetMaxOpenConns(1) // every round, and every check, on one session
	ctx := context.Background()
	sku := newSKU(t, s, 10)

	sets := func() (n int64) {
		t.Helper()
		var name string
		if err := s.sql.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_set_option'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := sets()
	for i, c := range []struct {
		wait     lockWait
		wantSets int64 // SET statements so far
	}{{7, 1}, {7, 1}, {7, 1}, {3, 2}, {7, 3}} {
		ms := []*member{newMember(sku.ID, fmt.Sprintf("u%d", i))}
		if err := s.commitMySQL(ctx, ms, c.wait); err != nil || ms[0].err != nil {
			t.Fatalf("round %d = %v, %v", i, err, ms[0].err)
		}
		var wait lockWait
		if err := s.sql.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if wait != c.wait {
			t.Errorf("round %d with wait %d left the session's wait at %d", i, c.wait, wait)
		}
		if got := sets() - before; got != c.wantSets {
			t.Errorf("after round %d: %d SET statements; want %d", i, got, c.wantSets)
		}
	}

	// A new connection is a new session: its first round sets its wait.
	// The sessions of the connections gone are not kept for ever.
	for i := range 5 {
		conn, err := s.sql.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // the pool closes it
		conn.Close()
		ms := []*member{newMember(sku.ID, fmt.Sprintf("n%d", i))}
		if err := s.commitMySQL(ctx, ms, 5); err != nil || ms[0].err != nil {
			t.Fatalf("round on new connection %d = %v, %v", i, err, ms[0].err)
		}
		var wait lockWait
		if err := s.sql.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if wait != 5 {
			t.Errorf("new connection %d: the round with wait 5 left the session's wait at %d", i, wait)
		}
		if n := len(s.sessions.m); n > 2 {
			t.Errorf("%d sessions remembered for a pool of one connection; want at most 2", n)
		}
	}
}
