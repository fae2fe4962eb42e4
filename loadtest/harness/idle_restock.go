package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/loadtest/verify"
)

// IdleRestockConfig is the idle-restock run: a SKU of Units units sells
// out on every instance but the first, nobody orders for Idle (longer than
// sold_out.local_ttl + sold_out.recheck, so every sold-out mark is
// stale), it is restocked to Units through the first instance and, once
// the sold-out bound has passed, Burst buyers (fewer than Units) hit the
// other instances at once: each must buy, since units remain throughout.
// Rounds times over; every answer is recorded and checked as a history.
type IdleRestockConfig struct {
	Instances    int           // default 3 (the first restocks, the others sell)
	Units        int64         // the stock each restock sets, default 30
	Burst        int           // buyers at once after a restock, default 20 (< Units)
	Rounds       int           // default 3
	Idle         time.Duration // default sold_out.local_ttl + sold_out.recheck + 1s
	SoldOutBound time.Duration // default DefaultSoldOutBound
	MySQLDSN     string
	ServiceBin   string
	Keep         bool
	Log          io.Writer
}

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
	if r.Pass() {
		fmt.Fprintln(w, "PASS")
		return
	}
	for _, v := range r.Violations {
		fmt.Fprintln(w, "FAIL:", v)
	}
}

// RunIdleRestock starts the database, a private Redis and the instances,
// runs the rounds and checks every answer against one stock counter.
func RunIdleRestock(ctx context.Context, cfg IdleRestockConfig) (res IdleRestockResult, err error) {
	def := config.Default()
	if cfg.Instances == 0 {
		cfg.Instances = 3
	}
	if cfg.Units == 0 {
		cfg.Units = 30
	}
	if cfg.Burst == 0 {
		cfg.Burst = 20
	}
	if cfg.Rounds == 0 {
		cfg.Rounds = 3
	}
	if cfg.Idle == 0 {
		cfg.Idle = def.SoldOut.LocalTTL + def.SoldOut.Recheck + time.Second
	}
	if cfg.Instances < 2 {
		return res, fmt.Errorf("the idle-restock run restocks through one instance and sells through the others: it needs 2 or more, not %d", cfg.Instances)
	}
	if int64(cfg.Burst) >= cfg.Units {
		return res, fmt.Errorf("the burst (%d) must be smaller than the units (%d): units remain throughout it", cfg.Burst, cfg.Units)
	}
	base, err := normalize(Config{Instances: cfg.Instances, MySQLDSN: cfg.MySQLDSN, ServiceBin: cfg.ServiceBin, Keep: cfg.Keep, Log: cfg.Log,
		SoldOutBound: cfg.SoldOutBound,
		Env:          []string{"SECKILL_AUTH_SHOPPER=none"}, // buyers are named in the body
	})
	if err != nil {
		return res, err
	}
	r, err := startScenario(ctx, base, "idle-restock", &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256}})
	defer r.tearDown()
	res.Dir = r.dir
	if err != nil {
		return res, err
	}
	res.Rounds, res.Burst, res.Units, res.IdleFor = cfg.Rounds, cfg.Burst, cfg.Units, cfg.Idle
	res.BurstAfter = r.cfg.SoldOutBound + 500*time.Millisecond
	var sku struct{ ID int64 }
	body := fmt.Sprintf(`{"name":"idle-restock","stock":%d,"per_user_limit":1}`, cfg.Units)
	if err := r.admin(ctx, http.MethodPost, r.baseURLs[0]+"/admin/v1/skus", []byte(body), http.StatusCreated, &sku); err != nil {
		return res, err
	}
	r.skuID, r.skuIDs = sku.ID, []int64{sku.ID}
	ir := &idleRun{run: r, history: newGoHistory()}
	start := time.Now()
	left := cfg.Units
	for round := 1; round <= cfg.Rounds; round++ {
		// Sell out: everything left, then one more order per selling
		// instance, so each holds a sold-out mark.
		ir.burst(ctx, int(left)+2*(cfg.Instances-1))
		for i := 1; i < cfg.Instances; i++ {
			ir.buyAt(ctx, i)
		}
		r.event("round %d: sold out; idle for %s", round, cfg.Idle)
		sleepCtx(ctx, cfg.Idle)
		if err := ir.restock(ctx, cfg.Units); err != nil {
			return res, err
		}
		sleepCtx(ctx, res.BurstAfter)
		b, s := ir.burst(ctx, cfg.Burst)
		res.Bought += b
		res.SoldOut += s
		r.event("round %d: restocked to %d through instance-0; %d buyers at the others %s later: %d bought, %d sold_out", round, cfg.Units, cfg.Burst, res.BurstAfter, b, s)
		left = cfg.Units - int64(b)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	res.Elapsed = time.Since(start)
	if err := r.db.QueryRowContext(ctx, "SELECT stock, sold, total_stock FROM skus WHERE id = ?", sku.ID).Scan(&res.Stock, &res.Sold, &res.Total); err != nil {
		return res, err
	}
	if res.SoldOut > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d sold_out answers to buyers after a restock, past the bound, while units remained", res.SoldOut))
	}
	res.History, err = r.checkGoHistory(ctx, ir.history, sku.ID, cfg.Units, 1, res.Stock)
	if err != nil {
		return res, err
	}
	for _, v := range res.History.Violations {
		res.Violations = append(res.Violations, "history: "+v.Message)
	}
	res.Violations = append(res.Violations, r.audit(ctx)...)
	return res, nil
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
	body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, ir.skuID, user)
	call := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ir.baseURLs[i]+"/api/v1/orders", strings.NewReader(body))
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	status, code, id := 0, "", int64(0)
	resp, err := ir.client.Do(req)
	if err == nil {
		var a orderAnswer
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&a)
		resp.Body.Close()
		status, code = resp.StatusCode, a.Error.Code
		id, _ = ir.orderIDs.Decode(a.OrderID)
	}
	ir.history.order(k, fmt.Sprintf("instance-%d", i), user, call, time.Now(), status, code, id, err)
	return status, code
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
	ir.history.mu.Lock()
	ir.history.ops = append(ir.history.ops, verify.Op{Kind: verify.Restock, Stock: units, Instance: "instance-0", Call: call, Return: time.Now(), Status: http.StatusOK, Client: -1})
	ir.history.mu.Unlock()
	return nil
}
