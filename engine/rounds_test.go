package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// roundBatch is a batch of one unit for each of users.
func roundBatch(skuID int64, users ...string) service.Batch {
	b := service.Batch{SKUID: skuID, Now: time.Now().UTC().Truncate(time.Microsecond)}
	for _, u := range users {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: skuID, UserID: u, Quantity: 1})
	}
	return b
}

// A round of four SKUs: one's row is locked by another transaction for the
// whole round, one's caller has already gone. The two others must commit
// exactly; the held SKU's buyers must be told the truth (an error means no
// order row); the gone caller's batch must write nothing.
func TestGroupCommit_OneSKUsHeldRowFailsOnlyItsOwnBuyers(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db)
	g := engine.NewGroupCommit(s, 0)
	ctx := context.Background()
	a, b, gone := wiringtest.CreateSKU(t, s, 10, 1), wiringtest.CreateSKU(t, s, 10, 1), wiringtest.CreateSKU(t, s, 10, 1)
	held := wiringtest.CreateSKU(t, s, 10, 1) // the highest id: the round's UPDATE locks the others' rows before it waits for this one

	blocker := testenv.HoldRow(t, db, held.ID)

	long, cancelLong := context.WithTimeout(ctx, time.Minute)
	defer cancelLong()
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second) // the held SKU's caller: the earliest deadline of the round
	defer cancelShort()
	left, leave := context.WithCancel(ctx)
	leave()
	bs := []service.Batch{
		roundBatch(held.ID, "h1", "h2"),
		roundBatch(a.ID, "a1", "a2", "a3"),
		roundBatch(gone.ID, "g1"),
		roundBatch(b.ID, "b1", "b2"),
	}
	res, errs := g.RunRound([]context.Context{short, long, left, long}, bs)
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}

	for _, i := range []int{1, 3} {
		if errs[i] != nil {
			t.Fatalf("sku %d (not held) = %v; want its orders committed", bs[i].SKUID, errs[i])
		}
		n := int64(len(bs[i].Requests))
		for j, out := range res[i].Outcomes {
			if out.Err != nil || !out.Placed.Created || out.Placed.Order.ID == 0 {
				t.Errorf("sku %d request %d = %+v; want a new order", bs[i].SKUID, j, out)
			}
		}
		if sold, stock, orders := testenv.SoldAndOrders(t, db, bs[i].SKUID); sold != n || stock != 10-n || orders != n {
			t.Errorf("sku %d: sold %d stock %d orders %d; want %d, %d, %d", bs[i].SKUID, sold, stock, orders, n, 10-n, n)
		}
	}
	if err := errs[0]; err == nil || errors.Is(err, service.ErrOutcomeUnknown) {
		t.Errorf("held sku = %v; want an error that says uncharged (its row was locked throughout)", err)
	}
	if sold, _, orders := testenv.SoldAndOrders(t, db, held.ID); sold != 0 || orders != 0 {
		t.Errorf("held sku: sold %d, %d orders after answering uncharged; want 0, 0", sold, orders)
	}
	if err := errs[2]; !errors.Is(err, context.Canceled) || !errors.Is(err, service.ErrUnavailable) {
		t.Errorf("gone caller = %v; want ErrUnavailable wrapping context.Canceled", err)
	}
	if sold, _, orders := testenv.SoldAndOrders(t, db, gone.ID); sold != 0 || orders != 0 {
		t.Errorf("gone caller's sku: sold %d, %d orders; want 0, 0", sold, orders)
	}
}

// A caller whose context ends while its batch waits for a round leaves at
// once, and nothing is written for it.
func TestGroupCommit_PendingCallerLeaves(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db)
	g := engine.NewGroupCommit(s, 0)
	sku := wiringtest.CreateSKU(t, s, 10, 1)
	free := g.TakeEveryRound() // the call must wait in pending

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.Commit(ctx, roundBatch(sku.ID, "u"))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, service.ErrUnavailable) {
		t.Errorf("Commit(cancelled, all rounds busy) = %v; want ErrUnavailable wrapping context.Canceled", err)
	}
	if pending := free(); pending != 0 {
		t.Errorf("%d calls still pending after their caller left; want 0", pending)
	}
	if sold, _, orders := testenv.SoldAndOrders(t, db, sku.ID); sold != 0 || orders != 0 {
		t.Errorf("sold %d, %d orders for a caller that left; want 0, 0", sold, orders)
	}
}

// One round at a time, but a round stuck on a row held elsewhere must not
// hold the other SKUs' batches behind it: after a stall they commit in a
// round of their own while the stuck one still waits. Without that, the
// other SKU's caller (10 s) would wait for the row's holder, which lets
// go only after that caller has been answered.
func TestGroupCommit_StuckRoundDoesNotHoldOtherSKUs(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db)
	g := engine.NewGroupCommit(s, 0)
	ctx := context.Background()
	held, other := wiringtest.CreateSKU(t, s, 10, 1), wiringtest.CreateSKU(t, s, 10, 1)

	blocker := testenv.HoldRow(t, db, held.ID)

	heldCtx, cancelHeld := context.WithTimeout(ctx, time.Minute)
	defer cancelHeld()
	heldDone := make(chan error, 1)
	go func() {
		_, err := g.Commit(heldCtx, roundBatch(held.ID, "h"))
		heldDone <- err
	}()
	waitForLockWait(t, db) // the held SKU's round is under way, waiting for the row

	otherCtx, cancelOther := context.WithTimeout(ctx, 10*time.Second)
	defer cancelOther()
	res, err := g.Commit(otherCtx, roundBatch(other.ID, "o"))
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
		if sold, stock, orders := testenv.SoldAndOrders(t, db, id); sold != 1 || stock != 9 || orders != 1 {
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

// With the round linger at order.linger's default (5ms), SKUs sold at
// once by many callers, one order per batch as at a moderate rate, sell
// exactly their stock: every order written once, none beyond the stock,
// every refusal a sold out. And one SKU on its own never waits for
// anybody: under a linger of an hour its batches still commit one after
// another (a wait would run into the caller's deadline and fail).
func TestGroupCommit_RoundLinger(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db)
	g := engine.NewGroupCommit(s, 5*time.Millisecond)
	const skus, stock, buyers = 12, 20, 30
	ids := make([]int64, skus)
	for i := range ids {
		ids[i] = wiringtest.CreateSKU(t, s, stock, 1).ID
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
				res, err := g.Commit(ctx, roundBatch(id, fmt.Sprintf("u-%d", u)))
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
		sold, left, orders := testenv.SoldAndOrders(t, db, id)
		if sold != stock || left != 0 || orders != stock || created[id] != stock {
			t.Errorf("sku %d: sold %d, stock %d, %d orders, %d answered created; want %d, 0, %d, %d",
				id, sold, left, orders, created[id], stock, stock, stock)
		}
	}

	alone := engine.NewGroupCommit(s, time.Hour)
	one := wiringtest.CreateSKU(t, s, 5, 1)
	for u := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := alone.Commit(ctx, roundBatch(one.ID, fmt.Sprintf("a-%d", u)))
		cancel()
		if err != nil || !res.Outcomes[0].Placed.Created {
			t.Fatalf("batch %d of a SKU alone under an hour's linger = %+v, %v; want committed at once", u, res, err)
		}
	}
}

// A round's linger may be longer than the round stall (order.linger
// accepts up to 100ms): a batch that stalls behind the lingering leader
// leads a round of its own, and must take only the batches still waiting,
// never the lingering leader's, which its leader commits when the linger
// ends. Each batch is committed once, each call answered once.
func TestGroupCommit_LingerPastTheStallCommitsEachBatchOnce(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := repository.NewMySQL(db)
	for _, linger := range []time.Duration{60 * time.Millisecond, 100 * time.Millisecond} {
		t.Run(linger.String(), func(t *testing.T) {
			g := engine.NewGroupCommit(s, linger)
			lingerer, staller := wiringtest.CreateSKU(t, s, 10, 10), wiringtest.CreateSKU(t, s, 10, 10)
			// Batches of 64 other SKUs came over the last 6.4ms: each is
			// expected again within the linger, so the leader lingers its
			// whole linger for them (they never come).
			for i := range 64 {
				g.Arrived(1<<40+int64(i), time.Duration(64-i)*100*time.Microsecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			type answer struct {
				res service.BatchResult
				err error
			}
			led := make(chan answer, 1)
			go func() {
				res, err := g.Commit(ctx, roundBatch(lingerer.ID, "l1", "l2"))
				led <- answer{res, err}
			}()
			for deadline := time.Now().Add(10 * time.Second); !g.Lingering(); {
				if time.Now().After(deadline) {
					t.Fatal("the first caller never lingered")
				}
				time.Sleep(100 * time.Microsecond) // polling a state, bounded above
			}
			// The second call waits behind the lingering leader; after
			// the round stall it leads a round of its own.
			res, err := g.Commit(ctx, roundBatch(staller.ID, "s1"))
			if err != nil || len(res.Outcomes) != 1 || !res.Outcomes[0].Placed.Created {
				t.Fatalf("stalled caller = %+v, %v; want its order", res, err)
			}
			a := <-led
			if a.err != nil || len(a.res.Outcomes) != 2 {
				t.Fatalf("lingering leader = %+v, %v; want its two orders", a.res, a.err)
			}
			for _, c := range []struct {
				id    int64
				units int64
			}{{lingerer.ID, 2}, {staller.ID, 1}} {
				if sold, stock, orders := testenv.SoldAndOrders(t, db, c.id); sold != c.units || stock != 10-c.units || orders != c.units {
					t.Errorf("sku %d: sold %d, stock %d, %d orders; want %d, %d, %d (each batch committed once)",
						c.id, sold, stock, orders, c.units, 10-c.units, c.units)
				}
			}
		})
	}
}

// lingerMax is the longest order.linger the configuration accepts.
func lingerMax(t *testing.T) time.Duration {
	t.Helper()
	for _, s := range config.Settings() {
		if _, hi, ok := s.Bounds(); ok && s.Key == "order.linger" {
			return time.Duration(hi)
		}
	}
	t.Fatal("order.linger has no upper bound")
	return 0
}

// End to end at the longest order.linger: buyers trickle into 8 SKUs on
// one instance (real lock and MariaDB), two per SKU, each sending its next
// order once answered, so workers and rounds linger and batches stall
// behind lingering leaders. Every SKU sells exactly its
// stock, once per order answered created.
func TestPlace_LongestLingerSellsEachOrderOnce(t *testing.T) {
	t.Parallel()
	linger := lingerMax(t)
	r := newRig(t, testenv.Database(t), rigOptions{Engine: func(c *engine.Config) { c.Linger = linger }})
	const skus, stock, buyers, each = 8, 20, 2, 15
	ids := make([]int64, skus)
	for i := range ids {
		ids[i] = wiringtest.CreateSKU(t, r.Store, stock, 1).ID
	}
	var (
		mu      sync.Mutex
		created = map[int64]int64{}
		wg      sync.WaitGroup
	)
	for _, id := range ids {
		for b := range buyers {
			wg.Go(func() {
				for i := range each {
					p, err := r.Orders.Place(context.Background(), service.OrderRequest{SKUID: id, UserID: fmt.Sprintf("u-%d-%d", b, i), Quantity: 1})
					switch {
					case err == nil && p.Created:
						mu.Lock()
						created[id]++
						mu.Unlock()
					case !errors.Is(err, service.ErrSoldOut):
						t.Errorf("sku %d: Place = %+v, %v; want an order or sold out", id, p, err)
					}
				}
			})
		}
	}
	wg.Wait()
	for _, id := range ids {
		if sold, left, orders := testenv.SoldAndOrders(t, r.DB, id); sold != stock || left != 0 || orders != stock || created[id] != stock {
			t.Errorf("sku %d: sold %d, stock %d, %d orders, %d answered created; want %d, 0, %d, %d", id, sold, left, orders, created[id], stock, stock, stock)
		}
	}
}
