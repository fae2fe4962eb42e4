package repository

import (
	"context"
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
	s := NewMySQL(db)
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
	s := NewMySQL(db)
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

// A transaction's lock wait rides in the round trips it makes anyway:
// set with START TRANSACTION, put back to the server's default with
// COMMIT or ROLLBACK. A batch decided on its reads costs 3 round trips, on
// its known row 2, as without a lock wait; the session is at the default
// after each, committed or rolled back.
func TestCommitMySQL_LockWaitRidesInTheTransactionsRoundTrips(t *testing.T) {
	t.Parallel()
	dsn, proxy := testenv.ThroughMySQLProxy(t, testenv.Database(t))
	db := testenv.DB(t, dsn)
	t.Cleanup(proxy.Cut)
	s := NewMySQL(db)
	s.sql.SetMaxOpenConns(1) // every transaction, and every check, on one session
	ctx := context.Background()
	sku, held := newSKU(t, s, 10), newSKU(t, s, 10)
	var global lockWait
	if err := s.sql.QueryRowContext(ctx, "SELECT @@GLOBAL.innodb_lock_wait_timeout").Scan(&global); err != nil {
		t.Fatal(err)
	}
	var known *service.SKU
	for i, c := range []struct {
		name       string
		wait       lockWait
		known      bool
		held       bool
		roundTrips int64
	}{
		{"read, wait 7", 7, false, false, 3},
		{"known, wait 7", 7, true, false, 2},
		{"known, wait 3", 3, true, false, 2},
		{"read, the default wait", 0, false, false, 3},
		{"known, the default wait", 0, true, false, 2},
		{"rolled back: its row held, wait 1", 1, false, true, 3}, // reads, the UPDATE that times out, ROLLBACK
	} {
		m := newMember(sku.ID, fmt.Sprintf("u%d", i))
		if c.known {
			m.b.Known = known
		}
		if c.held {
			m = newMember(held.ID, "h")
			tx := testenv.HoldRow(t, testenv.DB(t, dsn), held.ID)
			defer tx.Rollback()
		}
		before := proxy.Commands()
		err := s.commitMySQL(ctx, []*member{m}, c.wait)
		trips := proxy.Commands() - before
		switch {
		case c.held && err == nil:
			t.Fatalf("%s: committed", c.name)
		case !c.held && (err != nil || m.err != nil):
			t.Fatalf("%s = %v, %v", c.name, err, m.err)
		case !c.held:
			known = &m.res.SKU
			if m.res.ReadsSkipped != c.known {
				t.Fatalf("%s: decided on the known row %v; want %v", c.name, m.res.ReadsSkipped, c.known)
			}
		}
		if trips != c.roundTrips {
			t.Errorf("%s: %d round trips; want %d", c.name, trips, c.roundTrips)
		}
		var wait lockWait
		if err := s.sql.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if wait != global {
			t.Errorf("%s left the session's lock wait at %d; want the server's default %d", c.name, wait, global)
		}
	}
}
