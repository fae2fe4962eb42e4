package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/loadtest/verify"
)

// The idle-restock run (-scenario idle-restock): a SKU of idleUnits units
// sells out on every instance but the first, nobody orders for the idle
// gap (longer than sold_out.local_ttl + sold_out.recheck, so every
// sold-out mark is stale), it is restocked to idleUnits through the first
// instance and, once the sold-out bound has passed, idleBurst buyers
// (fewer than idleUnits) hit the other instances at once: each must buy,
// since units remain throughout. idleRounds times over; every answer is
// recorded and checked as a history.
const (
	idleUnits  = 30
	idleBurst  = 20
	idleRounds = 3
)

// IdleRestockResult is what the run found.
type IdleRestockResult struct {
	Rounds, Burst       int
	Units               int64
	Bought, SoldOut     int // answers to the bursts after the restocks
	Stock, Sold, Total  int64
	History             verify.HistoryVerdict
	Dir                 string
	Violations          []string
	Elapsed             time.Duration
	IdleFor, BurstAfter time.Duration
}

// Pass reports whether every answer was right.
func (r IdleRestockResult) Pass() bool { return len(r.Violations) == 0 }

// WriteText prints the result.
func (r IdleRestockResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "idle restock: %d rounds of sell-out, %s idle, restock to %d through instance-0, %d buyers at the others %s later (%.1fs)\n",
		r.Rounds, r.IdleFor, r.Units, r.Burst, r.BurstAfter, r.Elapsed.Seconds())
	fmt.Fprintf(w, "  bursts after the restocks: %d bought, %d sold_out (want 0)\n", r.Bought, r.SoldOut)
	fmt.Fprintf(w, "  sku: stock %d, sold %d, total %d\n", r.Stock, r.Sold, r.Total)
	fmt.Fprintf(w, "  history: %s\n", r.History)
	fmt.Fprintf(w, "  results: %s\n", r.Dir)
	writeVerdict(w, r.Violations)
}

// RunIdleRestock starts the database, a private Redis and cfg's instances
// (2 or more: the first restocks, the others sell), runs the rounds and
// checks every answer against one stock counter.
func RunIdleRestock(ctx context.Context, cfg Config) (res IdleRestockResult, err error) {
	base, err := scenarioConfig(cfg, "SECKILL_AUTH_SHOPPER=none") // buyers are named in the body
	if err != nil {
		return res, err
	}
	if base.Instances < 2 {
		return res, fmt.Errorf("the idle-restock run restocks through one instance and sells through the others: it needs 2 or more, not %d", base.Instances)
	}
	r, err := startScenario(ctx, base, "idle-restock", 256)
	defer r.tearDown()
	res.Dir = r.dir
	if err != nil {
		return res, err
	}
	def := config.Default()
	res.Rounds, res.Burst, res.Units = idleRounds, idleBurst, idleUnits
	res.IdleFor = def.SoldOut.LocalTTL + def.SoldOut.Recheck + time.Second
	res.BurstAfter = r.cfg.SoldOutBound + 500*time.Millisecond
	if r.skuID, err = r.createSKU(ctx, "idle-restock", idleUnits, 1); err != nil {
		return res, err
	}
	r.skuIDs = []int64{r.skuID}
	ir := &idleRun{run: r, history: newGoHistory()}
	start := time.Now()
	if err := ir.rounds(ctx, &res); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	if err := r.db.QueryRowContext(ctx, "SELECT stock, sold, total_stock FROM skus WHERE id = ?", r.skuID).Scan(&res.Stock, &res.Sold, &res.Total); err != nil {
		return res, err
	}
	if res.SoldOut > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d sold_out answers to buyers after a restock, past the bound, while units remained", res.SoldOut))
	}
	if res.History, err = r.checkGoHistory(ctx, ir.history, r.skuID, idleUnits, 1, res.Stock); err != nil {
		return res, err
	}
	res.Violations = append(res.Violations, historyViolations(res.History)...)
	res.Violations = append(res.Violations, r.audit(ctx)...)
	return res, nil
}

// rounds sells out, waits out the idle gap, restocks through instance-0
// and sends the burst at the others, res.Rounds times.
func (ir *idleRun) rounds(ctx context.Context, res *IdleRestockResult) error {
	left := int64(idleUnits)
	for round := 1; round <= res.Rounds; round++ {
		// Sell out: everything left, then one more order per selling
		// instance, so each holds a sold-out mark.
		ir.burst(ctx, int(left)+2*(len(ir.baseURLs)-1))
		for i := 1; i < len(ir.baseURLs); i++ {
			ir.buyAt(ctx, i)
		}
		ir.event("round %d: sold out; idle for %s", round, res.IdleFor)
		sleepCtx(ctx, res.IdleFor)
		if err := ir.restock(ctx, idleUnits); err != nil {
			return err
		}
		sleepCtx(ctx, res.BurstAfter)
		b, s := ir.burst(ctx, idleBurst)
		res.Bought += b
		res.SoldOut += s
		ir.event("round %d: restocked to %d through instance-0; %d buyers at the others %s later: %d bought, %d sold_out", round, idleUnits, idleBurst, res.BurstAfter, b, s)
		left = idleUnits - int64(b)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// idleRun is the state of one idle-restock run.
type idleRun struct {
	*run
	history *goHistory
	mu      sync.Mutex
	buyers  int
}

// buyAt sends one order of a new buyer to instance i and records it;
// it reports the answer's status and error code.
func (ir *idleRun) buyAt(ctx context.Context, i int) (int, string) {
	ir.mu.Lock()
	ir.buyers++
	k := ir.buyers
	ir.mu.Unlock()
	user := fmt.Sprintf("buyer-%d", k)
	call := time.Now()
	p, err := ir.order(ctx, ir.baseURLs[i], user, "", "")
	a := p.answer()
	id, _ := ir.orderIDs.Decode(a.OrderID)
	ir.history.order(k, fmt.Sprintf("instance-%d", i), user, call, time.Now(), p.status, a.Error.Code, id, err)
	return p.status, a.Error.Code
}

// burst sends n orders of new buyers at once, spread over every instance
// but the first, and counts the 201 and sold_out answers.
func (ir *idleRun) burst(ctx context.Context, n int) (bought, soldOut int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for j := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, code := ir.buyAt(ctx, 1+j%(len(ir.baseURLs)-1))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case status == http.StatusCreated:
				bought++
			case status == http.StatusConflict && code == verify.SoldOutAnswer:
				soldOut++
			}
		}()
	}
	wg.Wait()
	return bought, soldOut
}

// restock sets the remaining stock through instance 0 and records it.
func (ir *idleRun) restock(ctx context.Context, units int64) error {
	body, _ := json.Marshal(map[string]int64{"stock": units})
	call := time.Now()
	err := ir.admin(ctx, http.MethodPut, fmt.Sprintf("%s/admin/v1/skus/%d/stock", ir.baseURLs[0], ir.skuID), body, http.StatusOK, nil)
	if err != nil {
		return fmt.Errorf("restock: %w (its outcome is unknown: the history cannot be checked)", err)
	}
	ir.history.restock(verify.Op{Kind: verify.Restock, Stock: units, Instance: "instance-0", Call: call, Return: time.Now(), Status: http.StatusOK, Client: -1})
	return nil
}
