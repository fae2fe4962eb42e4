package repository

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

func newSKU(t *testing.T, s *Stock, stock int64) service.SKU {
	t.Helper()
	now := time.Now().UTC()
	sku, err := s.CreateSKU(context.Background(), service.SKU{Name: "g", TotalStock: stock, Stock: stock, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return sku
}

func newCall(ctx context.Context, skuID int64, users ...string) *groupCall {
	b := service.Batch{SKUID: skuID, Now: time.Now().UTC().Truncate(time.Microsecond), Shared: true}
	for _, u := range users {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: skuID, UserID: u, Quantity: 1})
	}
	return &groupCall{ctx: ctx, m: member{b: b}, done: make(chan struct{}), lead: make(chan struct{})}
}

// holdRow locks a SKU's row in a transaction of its own until the test
// rolls it back (or ends).
func holdRow(t *testing.T, s *Stock, skuID int64) *sql.Tx {
	t.Helper()
	tx, err := s.sql.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(context.Background(), "SELECT id FROM skus WHERE id = ? FOR UPDATE", skuID); err != nil {
		t.Fatal(err)
	}
	return tx
}

// soldAndOrders reads what the database holds for a SKU.
func soldAndOrders(t *testing.T, db *gorm.DB, skuID int64) (sold, stock, orders int64) {
	t.Helper()
	if err := db.Raw("SELECT sold, stock FROM skus WHERE id = ?", skuID).Row().Scan(&sold, &stock); err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ?", skuID).Row().Scan(&orders); err != nil {
		t.Fatal(err)
	}
	return sold, stock, orders
}

// A round of four SKUs: one's row is locked by another transaction for the
// whole round, one's caller has already gone. The two others must commit
// exactly; the held SKU's buyers must be told the truth (an error means no
// order row); the gone caller's batch must write nothing.
func TestRunRound_OneSKUsHeldRowFailsOnlyItsOwnBuyers(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := New(db)
	ctx := context.Background()
	a, b, gone := newSKU(t, s, 10), newSKU(t, s, 10), newSKU(t, s, 10)
	held := newSKU(t, s, 10) // the highest id: the round's UPDATE locks the others' rows before it waits for this one

	blocker := holdRow(t, s, held.ID)

	long, cancelLong := context.WithTimeout(ctx, time.Minute)
	defer cancelLong()
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second) // the held SKU's caller: the earliest deadline of the round
	defer cancelShort()
	left, leave := context.WithCancel(ctx)
	leave()
	round := []*groupCall{
		newCall(short, held.ID, "h1", "h2"),
		newCall(long, a.ID, "a1", "a2", "a3"),
		newCall(left, gone.ID, "g1"),
		newCall(long, b.ID, "b1", "b2"),
	}
	s.runRound(round)
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []*groupCall{round[1], round[3]} {
		if c.m.err != nil {
			t.Fatalf("sku %d (not held) = %v; want its orders committed", c.m.b.SKUID, c.m.err)
		}
		n := int64(len(c.m.b.Requests))
		for i, out := range c.m.res.Outcomes {
			if out.Err != nil || !out.Placed.Created || out.Placed.Order.ID == 0 {
				t.Errorf("sku %d request %d = %+v; want a new order", c.m.b.SKUID, i, out)
			}
		}
		if sold, stock, orders := soldAndOrders(t, db, c.m.b.SKUID); sold != n || stock != 10-n || orders != n {
			t.Errorf("sku %d: sold %d stock %d orders %d; want %d, %d, %d", c.m.b.SKUID, sold, stock, orders, n, 10-n, n)
		}
	}
	if err := round[0].m.err; err == nil || errors.Is(err, service.ErrOutcomeUnknown) {
		t.Errorf("held sku = %v; want an error that says uncharged (its row was locked throughout)", err)
	}
	if sold, _, orders := soldAndOrders(t, db, held.ID); sold != 0 || orders != 0 {
		t.Errorf("held sku: sold %d, %d orders after answering uncharged; want 0, 0", sold, orders)
	}
	if err := round[2].m.err; !errors.Is(err, context.Canceled) || !errors.Is(err, service.ErrUnavailable) {
		t.Errorf("gone caller = %v; want ErrUnavailable wrapping context.Canceled", err)
	}
	if sold, _, orders := soldAndOrders(t, db, gone.ID); sold != 0 || orders != 0 {
		t.Errorf("gone caller's sku: sold %d, %d orders; want 0, 0", sold, orders)
	}
}

// A caller whose context ends while its batch waits for a round leaves at
// once, and nothing is written for it.
func TestCommitShared_PendingCallerLeaves(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := New(db)
	sku := newSKU(t, s, 10)
	s.group.mu.Lock()
	s.group.leaders = maxRounds // every round slot taken: the call must wait in pending
	s.group.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := newCall(ctx, sku.ID, "u")
	_, err := s.CommitBatch(ctx, c.m.b)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, service.ErrUnavailable) {
		t.Errorf("CommitBatch(cancelled, all rounds busy) = %v; want ErrUnavailable wrapping context.Canceled", err)
	}
	s.group.mu.Lock()
	pending := len(s.group.pending)
	s.group.leaders = 0
	s.group.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d calls still pending after their caller left; want 0", pending)
	}
	if sold, _, orders := soldAndOrders(t, db, sku.ID); sold != 0 || orders != 0 {
		t.Errorf("sold %d, %d orders for a caller that left; want 0, 0", sold, orders)
	}
}

// One round at a time, but a round stuck on a row held elsewhere must not
// hold the other SKUs' batches behind it: after roundStall they commit in
// a round of their own while the stuck one still waits. Without that,
// the other SKU's caller (10 s) would wait for the row's holder, which
// lets go only after that caller has been answered.
func TestCommitShared_StuckRoundDoesNotHoldOtherSKUs(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := New(db)
	ctx := context.Background()
	held, other := newSKU(t, s, 10), newSKU(t, s, 10)

	blocker := holdRow(t, s, held.ID)

	heldCtx, cancelHeld := context.WithTimeout(ctx, time.Minute)
	defer cancelHeld()
	heldDone := make(chan error, 1)
	go func() {
		_, err := s.CommitBatch(heldCtx, newCall(heldCtx, held.ID, "h").m.b)
		heldDone <- err
	}()
	waitForLockWait(t, db) // the held SKU's round is under way, waiting for the row

	otherCtx, cancelOther := context.WithTimeout(ctx, 10*time.Second)
	defer cancelOther()
	res, err := s.CommitBatch(otherCtx, newCall(otherCtx, other.ID, "o").m.b)
	if err != nil || len(res.Outcomes) != 1 || !res.Outcomes[0].Placed.Created {
		t.Fatalf("other sku behind a stuck round = %+v, %v; want its order committed", res, err)
	}
	select {
	case err := <-heldDone:
		t.Fatalf("the held sku's batch ended (%v) while its row was still held", err)
	default:
	}
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-heldDone; err != nil {
		t.Errorf("held sku after its row was let go = %v; want committed", err)
	}
	for _, id := range []int64{held.ID, other.ID} {
		if sold, stock, orders := soldAndOrders(t, db, id); sold != 1 || stock != 9 || orders != 1 {
			t.Errorf("sku %d: sold %d stock %d orders %d; want 1, 9, 1", id, sold, stock, orders)
		}
	}
}

// waitForLockWait returns once a transaction of db's server waits for a
// row lock, polling the server (bounded), not sleeping a guess. InnoDB
// refreshes what information_schema shows of its transactions only when
// it was last read more than 0.1 s ago: polled faster, it never changes.
func waitForLockWait(t *testing.T, db *gorm.DB) {
	t.Helper()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		var n int64
		if err := db.Raw("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'").Row().Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("no transaction waited for the held row within 30s")
		}
	}
}
