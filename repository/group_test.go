package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
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

// The round linger waits only when other SKUs' batches are coming that
// would at least double the round: never for one SKU on its own, a stream
// that stopped, a SKU that came once long ago, or SKUs already in the
// round.
func TestWorthLingering(t *testing.T) {
	const linger = 5 * time.Millisecond
	ms := int64(time.Millisecond)
	leaderOf := func(sku int64) *groupCall { return newCall(context.Background(), sku) }
	// stream gives 200 batches, gap apart, of the SKUs skuOf names; now is
	// after the last.
	stream := func(gap int64, skuOf func(i int) int64, after int64) func(*groupCommit) int64 {
		return func(g *groupCommit) int64 {
			at := int64(0)
			for i := range 200 {
				at += gap
				g.arrivedAt(skuOf(i), at)
			}
			return at + after
		}
	}
	cycle := func(n int) func(int) int64 { return func(i int) int64 { return int64(i%n + 1) } }
	hotAndOnce := func(i int) int64 {
		if i == 150 {
			return 2
		}
		return 1
	}
	tests := []struct {
		name        string
		linger      time.Duration
		arrivals    func(g *groupCommit) (now int64)
		pending     []int64 // SKUs of the calls already waiting for the round
		leader      int64
		want        bool
		wantJoiners int // when want
	}{
		// The ring holds the latest 64 batches, of SKUs 37-100, over the
		// last 31.5ms: each is expected 5/31.5 times within the linger.
		{name: "100 SKUs, a batch every 0.5ms", linger: linger, leader: 1, want: true, wantJoiners: 10,
			arrivals: stream(ms/2, cycle(100), 0)},
		{name: "the same, the leader's round already as large as those expected", linger: linger, leader: 1,
			pending:  []int64{37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47}, // 53 others: 8.4 expected, fewer than 12
			arrivals: stream(ms/2, cycle(100), 0)},
		{name: "the same, stopped a second ago", linger: linger, leader: 1,
			arrivals: stream(ms/2, cycle(100), 1000*ms)},
		{name: "the same, order.linger 0", linger: 0, leader: 1,
			arrivals: stream(ms/2, cycle(100), 0)},
		{name: "one SKU, a batch every 0.1ms", linger: linger, leader: 1,
			arrivals: stream(ms/10, cycle(1), 0)},
		{name: "a hot SKU and another that came once", linger: linger, leader: 1,
			arrivals: stream(2*ms, hotAndOnce, 0)},
		{name: "two hot SKUs, the other not in the round yet", linger: linger, leader: 1, want: true, wantJoiners: 1,
			arrivals: stream(ms, cycle(2), 0)},
		{name: "two hot SKUs, both in the round", linger: linger, leader: 1, pending: []int64{2},
			arrivals: stream(ms, cycle(2), 0)},
		// The third alone would not double a round of two.
		{name: "three hot SKUs, two in the round", linger: linger, leader: 1, pending: []int64{2},
			arrivals: stream(ms, cycle(3), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &groupCommit{linger: tt.linger}
			now := tt.arrivals(g)
			leader := leaderOf(tt.leader)
			g.pending = append(g.pending, leader)
			for _, sku := range tt.pending {
				g.pending = append(g.pending, leaderOf(sku))
			}
			joiners, ok := g.worthLingering(leader, now)
			if ok != tt.want || (ok && joiners != tt.wantJoiners) {
				t.Errorf("worthLingering = %d, %v; want %d, %v", joiners, ok, tt.wantJoiners, tt.want)
			}
		})
	}
}

// With the round linger at its default (order.linger's 5ms), SKUs sold at
// once by many callers, one order per batch as at a moderate rate, sell
// exactly their stock: every order written once, none beyond the stock,
// every refusal a sold out. And one SKU on its own never waits for
// anybody: under a linger of an hour its batches still commit one after
// another (a wait would run into the caller's deadline and fail).
func TestCommitShared_RoundLinger(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := New(db, GroupLinger(5*time.Millisecond))
	const skus, stock, buyers = 12, 20, 30
	ids := make([]int64, skus)
	for i := range ids {
		ids[i] = newSKU(t, s, stock).ID
	}
	type result struct {
		sku     int64
		created bool
		err     error
	}
	results := make(chan result, skus*buyers)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { // one worker per SKU, as the service runs them
			for u := range buyers {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res, err := s.CommitBatch(ctx, newCall(ctx, id, fmt.Sprintf("u-%d", u)).m.b)
				cancel()
				if err == nil {
					err = res.Outcomes[0].Err
				}
				results <- result{sku: id, created: err == nil && res.Outcomes[0].Placed.Created, err: err}
			}
		})
	}
	wg.Wait()
	close(results)
	created := map[int64]int64{}
	for r := range results {
		switch {
		case r.created:
			created[r.sku]++
		case !errors.Is(r.err, service.ErrSoldOut):
			t.Errorf("sku %d: %v; want an order or sold out", r.sku, r.err)
		}
	}
	for _, id := range ids {
		sold, left, orders := soldAndOrders(t, db, id)
		if sold != stock || left != 0 || orders != stock || created[id] != stock {
			t.Errorf("sku %d: sold %d, stock %d, %d orders, %d answered created; want %d, 0, %d, %d",
				id, sold, left, orders, created[id], stock, stock, stock)
		}
	}

	alone := New(db, GroupLinger(time.Hour))
	one := newSKU(t, alone, 5)
	for u := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := alone.CommitBatch(ctx, newCall(ctx, one.ID, fmt.Sprintf("a-%d", u)).m.b)
		cancel()
		if err != nil || !res.Outcomes[0].Placed.Created {
			t.Fatalf("batch %d of a SKU alone under an hour's linger = %+v, %v; want committed at once", u, res, err)
		}
	}
}
