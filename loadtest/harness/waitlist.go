package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
	"github.com/seckill/seckill/lock/locktest"
)

// The waitlist run (-scenario waitlist, loadtest/README.md): waitHolders
// hold the SKU's units, waitBuyers wait for them, and the units returned
// (waitCancels cancelled, those not among waitPays expired) and a restock
// must go to the earliest waiters by the packets' clock, each once.
const (
	waitHolders   = 200
	waitBuyers    = 1000
	waitOver      = 500 * time.Millisecond
	waitCancels   = 60
	waitPays      = 80
	waitRestock   = 50
	waitPayment   = 3 * time.Second // order.payment_timeout
	waitHeardGoal = 100 * time.Millisecond
	waitPoll      = "wait=25" // Prefer: under the client's 30s timeout
	waitMaxTries  = 400       // reads and retries of one request, each bounded
)

// WaitFaults are the faults the waitlist run can strike.
var WaitFaults = []string{FaultNone, FaultInstance, FaultRedis, FaultMySQL}

// waitRun is the state of one waitlist run.
type waitRun struct {
	*run
	holders, waiters *fairRun
	pollOn           []int       // the instances the waiters long-poll
	heard            []waitHeard // by waiter
	freeWhileWaiting string      // what the SKU held while waiters waited, when it held units
	// The polling instances' long-polls answered after a commit elsewhere
	// while the units came back: within waitHeardGoal, and all.
	heardWithin, heardAll float64
}

// waitHeard is what a waiter's long-poll heard: when it read its order
// pending, and the order's last status it read.
type waitHeard struct {
	allocated time.Time
	final     string
}

// RunWaitlist starts the database, a private Redis and cfg's instances,
// runs the waitlist's two acts with cfg.Fault and holds everything to the
// sale's checks and the waitlist's own.
func RunWaitlist(ctx context.Context, cfg Config) (res ScenarioResult, err error) {
	fault := cmp.Or(cfg.Fault, FaultNone)
	if !slices.Contains(WaitFaults, fault) {
		return res, fmt.Errorf("-scenario waitlist strikes %s, not %q", strings.Join(WaitFaults, ", "), fault)
	}
	sc := scenario{name: "waitlist", minInstances: 2, conns: waitBuyers, units: waitHolders, fault: fault,
		env: append([]string{"SECKILL_AUTH_SHOPPER=none", "SECKILL_ORDER_PAYMENT_TIMEOUT=" + waitPayment.String()}, cfg.Env...)}
	r, err := sc.start(ctx, cfg)
	defer r.stop()
	if err != nil {
		return res, err
	}
	w := &waitRun{run: r, heard: make([]waitHeard, waitBuyers),
		holders: &fairRun{run: r, name: "holder", buyers: make([]fairBuyer, waitHolders)},
		waiters: &fairRun{run: r, name: "waiter", wait: true, buyers: make([]fairBuyer, waitBuyers)}}
	w.holders.warm(ctx, waitBuyers/len(r.instances)+1)
	clock, clockErr := startPackets(ctx, r.dir, r.ports())
	defer clock.stop()
	start := time.Now()
	if err := w.acts(ctx); err != nil {
		return res, err
	}
	res.line("waitlist: %d units to %d holders (%d cancel, %d pay), %d waiters over %s, a restock of %d; %d instance(s), fault %s (%.1fs)",
		waitHolders, waitHolders, waitCancels, waitPays, waitBuyers, waitOver, waitRestock, len(r.instances), fault, time.Since(start).Seconds())
	res.line("  arrivals: %s", timeArrivals(ctx, clock, clockErr, w.holders, w.waiters))
	return res, w.check(ctx, &res)
}

// acts runs the sale: the holders, the waiters and their long-polls, the
// returns (and the fault), the restock and the sale's end.
func (w *waitRun) acts(ctx context.Context) error {
	r := w.run
	w.event("waitlist: %d holders", waitHolders)
	w.holders.send(ctx, waitOver/2)
	w.each(waitCancels, waitCancels+waitPays, func(k int) { w.pay(ctx, k, w.holders.buyers[k].ref) })
	r.event("waitlist: %d waiters over %s", waitBuyers, waitOver)
	w.waiters.send(ctx, waitOver)
	joined := time.Now()
	leader, err := r.sweeperLeader(ctx, -1)
	if err != nil {
		return err
	}
	for i := range r.instances {
		if i != 0 && (i != leader || len(r.instances) == 2) {
			w.pollOn = append(w.pollOn, i)
		}
	}
	var polls sync.WaitGroup
	for k := range waitBuyers {
		polls.Go(func() { w.follow(ctx, k) })
	}
	defer polls.Wait()
	if err := locktest.Poll(ctx, "every waiter long-polling", time.Minute, 50*time.Millisecond, func(ctx context.Context) error {
		if n := r.metricSum(ctx, "seckill_long_polls "); n < waitBuyers {
			return fmt.Errorf("%d of %d held", n, waitBuyers)
		}
		return nil
	}); err != nil {
		return err
	}
	within, all := w.heardSoFar(ctx)
	if err := w.returns(ctx); err != nil {
		return err
	}
	r.event("waitlist: restock %d", waitRestock)
	if err := w.restock(ctx); err != nil {
		return err
	}
	w.heardWithin, w.heardAll = w.heardSoFar(ctx)
	w.heardWithin, w.heardAll = w.heardWithin-within, w.heardAll-all
	var early int
	if err := r.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE sku_id = ? AND allocated_at < ?", r.skuID, joined.UTC()).Scan(&early); err != nil || early > 0 {
		return fmt.Errorf("units came back before every waiter had joined (%d given early, %v): the box is too slow for this run", early, err)
	}
	r.event("waitlist: the sale ends")
	ends := time.Now().Add(100 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	return r.admin(ctx, http.MethodPatch, fmt.Sprintf("%s/admin/v1/skus/%d", r.baseURLs[0], r.skuID), `{"ends_at":"`+ends+`"}`, http.StatusOK, nil)
}

// returns cancels the first waitCancels holders' orders through instance
// 0, striking the fault meanwhile, and waits until the units returned
// (those and the expired holders') are settled.
func (w *waitRun) returns(ctx context.Context) error {
	r := w.run
	fault := make(chan error, 1)
	go func() { fault <- r.inject(ctx) }()
	r.event("waitlist: %d cancels; %d orders expire", waitCancels, waitHolders-waitCancels-waitPays)
	w.each(0, waitCancels, func(k int) {
		b := w.holders.buyers[k]
		call := time.Now()
		p := w.retried(ctx, 0, "/api/v1/orders/"+b.ref+"/cancel", "")
		op := verify.Op{Kind: verify.Returned, User: w.holders.user(k), Qty: 1, OrderID: b.orderID, Instance: "instance-0",
			Call: call, Return: time.Now(), Status: p.status}
		w.holders.mu.Lock()
		r.restocks.ops = append(r.restocks.ops, op)
		w.holders.mu.Unlock()
	})
	if err := <-fault; err != nil {
		return err
	}
	return w.settled(ctx)
}

// restock sets the sold-out SKU's stock to waitRestock, which goes to the
// next waiters in the same transaction.
func (w *waitRun) restock(ctx context.Context) error {
	r := w.run
	var out struct {
		Stock int64 `json:"stock"`
		Sold  int64 `json:"sold"`
	}
	call := time.Now()
	err := locktest.Poll(ctx, "the restock", time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		return r.admin(ctx, http.MethodPut, fmt.Sprintf("%s/admin/v1/skus/%d/stock", r.baseURLs[0], r.skuID),
			fmt.Sprintf(`{"stock":%d}`, waitRestock), http.StatusOK, &out)
	})
	if err != nil {
		return err
	}
	r.restocks.ops = append(r.restocks.ops, verify.Op{Kind: verify.Restock, Stock: waitRestock, Instance: "instance-0",
		Call: call, Return: time.Now(), Status: http.StatusOK})
	r.restocks.total = out.Stock + out.Sold
	return w.settled(ctx)
}

// settled waits until no order of the SKU is pending (the holders' paid
// or expired, the waiters given units paid or expired) and then reads
// whether units were free while waiters waited.
func (w *waitRun) settled(ctx context.Context) error {
	return locktest.Poll(ctx, "the returned units settled", 2*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		var pending, stock, waiters int64
		err := w.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM orders WHERE sku_id = ? AND status = 'pending'), stock, waiters
			FROM skus WHERE id = ?`, w.skuID, w.skuID).Scan(&pending, &stock, &waiters)
		switch {
		case err != nil:
			return err
		case pending > 0:
			return fmt.Errorf("%d orders pending", pending)
		case stock > 0 && waiters > 0 && w.freeWhileWaiting == "":
			w.freeWhileWaiting = fmt.Sprintf("%d unit(s) free while %d waiter(s) wait", stock, waiters)
		}
		return nil
	})
}

// heardSoFar sums, over the instances the waiters poll, the long-polls
// answered within waitHeardGoal of a commit they heard of, and all of
// them (seckill_long_poll_heard_seconds: from the committing instance's
// record just after its COMMIT to the answer).
func (w *waitRun) heardSoFar(ctx context.Context) (within, all float64) {
	le := fmt.Sprintf(`seckill_long_poll_heard_seconds_bucket{le="%g"} `, waitHeardGoal.Seconds())
	for _, i := range w.pollOn {
		n, _, _ := w.metric(ctx, i, le)
		m, _, _ := w.metric(ctx, i, "seckill_long_poll_heard_seconds_count ")
		within, all = within+n, all+m
	}
	return within, all
}

// each runs f for every k in [from, to) at once and waits for them all.
func (w *waitRun) each(from, to int, f func(k int)) {
	var wg sync.WaitGroup
	for k := from; k < to; k++ {
		wg.Go(func() { f(k) })
	}
	wg.Wait()
}

// pay confirms the order ref as the payment system does; it reports
// whether the order is paid.
func (w *waitRun) pay(ctx context.Context, k int, ref string) bool {
	return w.retried(ctx, k, "/internal/v1/orders/"+ref+"/paid", w.payToken).status == http.StatusOK
}

// retried POSTs to path, from instance i on, until it is answered other
// than 429 or 503, moving to the next instance each time it is not,
// within waitMaxTries.
func (w *waitRun) retried(ctx context.Context, i int, path, token string) reply {
	var p reply
	for try := 0; try < waitMaxTries && ctx.Err() == nil; try++ {
		var err error
		p, err = w.run.send(ctx, http.MethodPost, w.baseURLs[(i+try)%len(w.baseURLs)]+path, "", token)
		if err == nil && p.status != http.StatusServiceUnavailable && p.status != http.StatusTooManyRequests {
			return p
		}
		sleepCtx(ctx, min(p.retryAfter, 100*time.Millisecond))
	}
	return p
}

// follow long-polls waiter k's order until it is no longer waiting, and
// pays for it when it is given its unit.
func (w *waitRun) follow(ctx context.Context, k int) {
	b, h := &w.waiters.buyers[k], &w.heard[k]
	if !b.joined() {
		return
	}
	tag := ""
	for try, fails := 0, 0; try < waitMaxTries && ctx.Err() == nil; try++ {
		i := w.pollOn[(k+fails)%len(w.pollOn)]
		status, next, code, err := w.read(ctx, i, b.ref, tag)
		switch {
		case err != nil || (code != http.StatusOK && code != http.StatusNotModified):
			fails++
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		case code == http.StatusNotModified:
			continue
		}
		tag, h.final = next, status
		switch status {
		case "waiting":
		case "pending":
			if h.allocated.IsZero() {
				h.allocated = time.Now()
			}
			if w.pay(ctx, k, b.ref) {
				h.final = "paid"
				return
			}
		default: // paid, expired, lapsed, cancelled: settled
			return
		}
	}
}

// read reads the order ref on instance i, holding the read while the
// order's ETag is tag; it returns the status and ETag of a 200.
func (w *waitRun) read(ctx context.Context, i int, ref, tag string) (status, etag string, code int, err error) {
	prefer := waitPoll
	if tag == "" {
		prefer = ""
	}
	p, err := w.run.send(ctx, http.MethodGet, w.baseURLs[i]+"/api/v1/orders/"+ref, "", "", "If-None-Match", tag, "Prefer", prefer)
	var o orderAnswer
	if err == nil && p.status == http.StatusOK {
		err = json.Unmarshal(p.body, &o)
	}
	return o.Status, p.etag, p.status, err
}
