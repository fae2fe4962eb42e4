package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// LifecycleConfig is the order-lifecycle run: Units units over
// Instances instances with a payment window of PaymentTimeout; buyers of
// whom 60% pay, 10% cancel, 20% never pay and 10% pay too late keep
// coming until Units orders are paid, which only the returned units make
// possible. Mid-run the sweeper's leader is frozen (SIGSTOP) past its
// lease, the instance that takes the lease over is killed (SIGKILL), and
// the frozen one resumes.
type LifecycleConfig struct {
	Instances      int           // default 3
	Units          int64         // default 1000
	Concurrency    int           // buyers at a time, default 32
	PaymentTimeout time.Duration // default 3s
	Freeze         time.Duration // how long the leader stays frozen, default 6s (lock.ttl is 3s)
	Deadline       time.Duration // the whole sale, default 5m
	MySQLDSN       string
	ServiceBin     string
	Keep           bool
	Log            io.Writer
}

// LifecycleResult is what the run found.
type LifecycleResult struct {
	Units                 int64
	Orders                map[string]int64 // status → orders, from the database
	Created               int64            // 201 answers
	PaidAnswers           int              // 200 to a payment
	RefusedAnswers        int              // 409 order_expired to a payment
	CancelAnswers         int              // 200 to a cancel
	ResoldAfterExpiry     int64            // paid orders created after the first expiry
	StaleSweeps           int64            // sweeps refused for a stale fence (instances alive at the end)
	Frozen, Killed        string
	Elapsed               time.Duration
	Stock, Sold, Total    int64
	PendingUnits, PaidSum int64
	History               verify.HistoryVerdict // every order answer, cancel and expiry against one stock counter
	Violations            []string
}

// Pass reports whether every invariant held.
func (r LifecycleResult) Pass() bool { return len(r.Violations) == 0 }

// WriteText prints the result.
func (r LifecycleResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "order lifecycle: %d units, %d orders created in %.1fs; by status %v\n", r.Units, r.Created, r.Elapsed.Seconds(), r.Orders)
	fmt.Fprintf(w, "  answers: %d payments 200, %d payments 409 order_expired, %d cancels 200\n", r.PaidAnswers, r.RefusedAnswers, r.CancelAnswers)
	fmt.Fprintf(w, "  sku: stock %d, sold %d, total %d; paid units %d, pending units %d\n", r.Stock, r.Sold, r.Total, r.PaidSum, r.PendingUnits)
	fmt.Fprintf(w, "  %d paid orders were created after the first expiry (returned units resold)\n", r.ResoldAfterExpiry)
	fmt.Fprintf(w, "  faults: sweeper leader %s frozen past its lease, %s killed; stale-fence sweeps refused: %d\n", r.Frozen, r.Killed, r.StaleSweeps)
	fmt.Fprintf(w, "  history: %s\n", r.History)
	if r.Pass() {
		fmt.Fprintln(w, "PASS")
		return
	}
	for _, v := range r.Violations {
		fmt.Fprintln(w, "FAIL:", v)
	}
}

// buyerFate is what a buyer does once their order is placed.
type buyerFate int

const (
	fatePays buyerFate = iota
	fateCancels
	fateAbandons
	fatePaysLate
)

func fateOfBuyer(k int64) buyerFate {
	switch k % 10 {
	case 0, 1:
		return fateAbandons
	case 2:
		return fatePaysLate
	case 3:
		return fateCancels
	}
	return fatePays
}

// cancelUnknown is an order whose cancel got no answer or a 503.
const cancelUnknown = "cancel-unanswered"

// lifecycleRun is the state of one lifecycle run.
type lifecycleRun struct {
	*run
	cfg      LifecycleConfig
	payToken string
	live     atomic.Pointer[[]int] // instances in the buyers' rotation
	buyers   atomic.Int64
	paid     atomic.Int64
	history  *goHistory

	mu        sync.Mutex
	answered  map[string]string // order id → what its last answer said it is
	created   int64
	refused   int
	cancelled int
	paidN     int
}

// RunLifecycle starts the database, a private Redis and the instances,
// runs the sale with its faults, and verifies the outcome in the database.
func RunLifecycle(ctx context.Context, cfg LifecycleConfig) (res LifecycleResult, err error) {
	setDefault := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if cfg.Instances == 0 {
		cfg.Instances = 3
	}
	if cfg.Units == 0 {
		cfg.Units = 1000
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 32
	}
	setDefault(&cfg.PaymentTimeout, 3*time.Second)
	setDefault(&cfg.Freeze, 6*time.Second)
	setDefault(&cfg.Deadline, 5*time.Minute)
	if cfg.Instances < 3 {
		return res, fmt.Errorf("the lifecycle run freezes one instance and kills another: it needs 3 or more, not %d", cfg.Instances)
	}
	payToken := randomHex(16)
	base, err := normalize(Config{Instances: cfg.Instances, MySQLDSN: cfg.MySQLDSN, ServiceBin: cfg.ServiceBin, Keep: cfg.Keep, Log: cfg.Log,
		Env: []string{
			"SECKILL_AUTH_SHOPPER=none", // buyers are named in the body; the opaque order id is the cancel's key
			"SECKILL_ORDER_PAYMENT_TIMEOUT=" + cfg.PaymentTimeout.String(),
			"SECKILL_AUTH_PAYMENT_TOKENS=" + payToken,
		}})
	if err != nil {
		return res, err
	}
	r, err := startScenario(ctx, base, "lifecycle", &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256}})
	defer r.tearDown()
	if err != nil {
		return res, err
	}
	lr := &lifecycleRun{run: r, cfg: cfg, payToken: payToken, answered: map[string]string{}, history: newGoHistory()}
	all := make([]int, len(r.instances))
	for i := range all {
		all[i] = i
	}
	lr.live.Store(&all)
	if r.skuID, err = lr.createSKU(ctx); err != nil {
		return res, err
	}

	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	faults := make(chan error, 1)
	go func() { faults <- lr.injectFaults(sctx, &res) }()
	var late sync.WaitGroup
	var wg sync.WaitGroup
	for client := range cfg.Concurrency {
		wg.Add(1)
		go func() { defer wg.Done(); lr.buy(sctx, client, &late) }()
	}
	wg.Wait()
	late.Wait()
	cancel()
	if err := <-faults; err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	if err := lr.waitSettled(ctx); err != nil {
		res.Violations = append(res.Violations, err.Error())
	}
	lr.verify(ctx, &res)
	if res.History, err = lr.checkGoHistory(ctx, lr.history, r.skuID, cfg.Units, 1, res.Stock); err != nil {
		return res, err
	}
	for _, v := range res.History.Violations {
		res.Violations = append(res.Violations, "history: "+v.Message)
	}
	return res, nil
}

func (lr *lifecycleRun) createSKU(ctx context.Context) (int64, error) {
	body := fmt.Sprintf(`{"name":"lifecycle","stock":%d,"per_user_limit":1}`, lr.cfg.Units)
	status, out, err := lr.post(ctx, lr.baseURLs[0]+"/admin/v1/skus", body, lr.token)
	if err != nil || status != http.StatusCreated {
		return 0, fmt.Errorf("create sku: %d %s %v", status, out, err)
	}
	var s struct{ ID int64 }
	if err := json.Unmarshal(out, &s); err != nil {
		return 0, err
	}
	return s.ID, nil
}

// post sends a JSON POST with an optional bearer token.
func (lr *lifecycleRun) post(ctx context.Context, url, body, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := lr.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, out, err
}

// instanceURL is the base URL of a live instance for buyer k.
func (lr *lifecycleRun) instanceURL(k int64) string {
	url, _ := lr.instanceFor(k)
	return url
}

// instanceFor is the base URL and name of a live instance for buyer k.
func (lr *lifecycleRun) instanceFor(k int64) (string, string) {
	live := *lr.live.Load()
	i := live[int(k)%len(live)]
	return lr.baseURLs[i], fmt.Sprintf("instance-%d", i)
}

type orderAnswer struct {
	OrderID   string    `json:"order_id"`
	Status    string    `json:"status"`
	ExpiresAt time.Time `json:"expires_at"`
	Error     struct {
		Code string `json:"code"`
	} `json:"error"`
}

// buy runs buyers one after another until Units are paid or ctx ends.
func (lr *lifecycleRun) buy(ctx context.Context, client int, late *sync.WaitGroup) {
	for lr.paid.Load() < lr.cfg.Units && ctx.Err() == nil {
		k := lr.buyers.Add(1)
		user := fmt.Sprintf("buyer-%d", k)
		url, instance := lr.instanceFor(k)
		call := time.Now()
		status, out, err := lr.post(ctx, url+"/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, lr.skuID, user), "")
		ret := time.Now()
		var o orderAnswer
		if err == nil {
			_ = json.Unmarshal(out, &o)
		}
		id, _ := lr.orderIDs.Decode(o.OrderID)
		lr.history.order(client, instance, user, call, ret, status, o.Error.Code, id, err)
		if err != nil || status != http.StatusCreated {
			// Sold out until units come back, or an instance going away:
			// the buyer's back-off, bounded by the sale's deadline.
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		if o.Status != "pending" || id == 0 {
			lr.violation("a new order answered %s; want pending with expires_at", out)
			continue
		}
		lr.note(o.OrderID, "pending", func() { lr.created++ })
		switch fateOfBuyer(k) {
		case fatePays:
			lr.pay(ctx, k, o.OrderID, false)
		case fateCancels:
			url, instance := lr.instanceFor(k)
			call := time.Now()
			status, out, err := lr.post(ctx, url+"/api/v1/orders/"+o.OrderID+"/cancel", "", "")
			if err != nil {
				status = 0
			}
			lr.history.cancel(id, user, instance, call, time.Now(), status)
			switch {
			case err == nil && status == http.StatusOK:
				lr.note(o.OrderID, "cancelled", func() { lr.cancelled++ })
			case err == nil && status != http.StatusServiceUnavailable:
				lr.violation("cancel of a pending order = %d %s", status, out)
			default: // no answer, or 503: the cancel may or may not have landed
				lr.note(o.OrderID, cancelUnknown, func() {})
			}
		case fatePaysLate:
			late.Add(1)
			go func() {
				defer late.Done()
				sleepCtx(ctx, time.Until(o.ExpiresAt)+20*time.Millisecond) // the buyer comes back after the window
				lr.pay(context.WithoutCancel(ctx), k, o.OrderID, true)
			}()
		}
	}
}

// pay confirms a payment as the payment system does, retrying a 503 or a
// lost answer (it is idempotent) a few times.
func (lr *lifecycleRun) pay(ctx context.Context, k int64, id string, tooLate bool) {
	for attempt := range 5 {
		status, out, err := lr.post(ctx, lr.instanceURL(k+int64(attempt))+"/internal/v1/orders/"+id+"/paid", "", lr.payToken)
		if err != nil || status == http.StatusServiceUnavailable {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		var a orderAnswer
		_ = json.Unmarshal(out, &a)
		switch {
		case status == http.StatusOK && !tooLate:
			lr.note(id, "paid", func() { lr.paidN++ })
			lr.paid.Add(1)
		case status == http.StatusConflict && a.Error.Code == "order_expired":
			lr.note(id, "expired", func() { lr.refused++ })
		default:
			lr.violation("payment (too late: %v) = %d %s", tooLate, status, out)
		}
		return
	}
}

func (lr *lifecycleRun) note(id, status string, count func()) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.answered[id] = status
	count()
}

func (lr *lifecycleRun) violation(format string, args ...any) {
	lr.event("VIOLATION: "+format, args...)
}

// injectFaults waits for the first expiries, freezes the sweeper's
// leader past its lease, kills the instance that takes the lease over,
// and resumes the frozen one.
func (lr *lifecycleRun) injectFaults(ctx context.Context, res *LifecycleResult) error {
	if err := poll(ctx, "the first expiry", 2*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		var n int64
		if err := lr.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE status = 'expired'").Scan(&n); err != nil || n == 0 {
			return fmt.Errorf("no order expired yet (%v)", err)
		}
		return nil
	}); err != nil {
		return err
	}
	frozen, err := lr.leader(ctx, -1)
	if err != nil {
		return err
	}
	lr.drop(frozen)
	res.Frozen = lr.instances[frozen].name
	lr.event("FAULT: SIGSTOP %s, the sweeper's leader, for %s (past its lease)", res.Frozen, lr.cfg.Freeze)
	if lr.instances[frozen].signal(syscall.SIGSTOP, 0) {
		return fmt.Errorf("%s: gone instead of frozen", res.Frozen)
	}
	resumeAt := time.Now().Add(lr.cfg.Freeze)
	next, err := lr.leader(ctx, frozen)
	if err != nil {
		lr.instances[frozen].signal(syscall.SIGCONT, 0)
		return err
	}
	lr.drop(next)
	res.Killed = lr.instances[next].name
	lr.event("FAULT: SIGKILL %s, the sweeper's new leader", res.Killed)
	if err := lr.instances[next].kill(); err != nil {
		return err
	}
	sleepCtx(context.WithoutCancel(ctx), time.Until(resumeAt))
	lr.event("FAULT: SIGCONT %s", res.Frozen)
	lr.instances[frozen].signal(syscall.SIGCONT, 0)
	if err := lr.waitReady(context.WithoutCancel(ctx), frozen, lr.baseURLs[frozen]); err != nil {
		return err
	}
	lr.add(frozen)
	return nil
}

// leader polls the live instances (but skip) for the one whose /metrics
// says it holds the sweeper's lease.
func (lr *lifecycleRun) leader(ctx context.Context, skip int) (int, error) {
	who := -1
	err := poll(ctx, "a sweeper leader", time.Minute, 50*time.Millisecond, func(ctx context.Context) error {
		for _, i := range *lr.live.Load() {
			if i == skip {
				continue
			}
			if v, _ := lr.metric(ctx, i, "seckill_sweeper_leader "); v == 1 {
				who = i
				return nil
			}
		}
		return fmt.Errorf("no live instance leads the sweeper")
	})
	return who, err
}

// metric reads one series (name and labels, then a space) from an
// instance's /metrics.
func (lr *lifecycleRun) metric(ctx context.Context, i int, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lr.baseURLs[i]+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, nil
}

func (lr *lifecycleRun) drop(i int) {
	var rest []int
	for _, j := range *lr.live.Load() {
		if j != i {
			rest = append(rest, j)
		}
	}
	lr.live.Store(&rest)
}

func (lr *lifecycleRun) add(i int) {
	next := append(append([]int(nil), *lr.live.Load()...), i)
	lr.live.Store(&next)
}

// waitSettled waits until no order is pending: the last abandoned ones
// expire within the window plus a sweep.
func (lr *lifecycleRun) waitSettled(ctx context.Context) error {
	return poll(ctx, "every order settled", time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		var n int64
		if err := lr.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE status = 'pending'").Scan(&n); err != nil || n > 0 {
			return fmt.Errorf("%d orders still pending (%v)", n, err)
		}
		return nil
	})
}

// verify reads the database: Units paid, none pending, the stock adds up,
// holdings agree with the live orders, and every answer a client was given
// is what the order is.
func (lr *lifecycleRun) verify(ctx context.Context, res *LifecycleResult) {
	bad := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	res.Units = lr.cfg.Units
	lr.mu.Lock()
	res.Created, res.PaidAnswers, res.RefusedAnswers, res.CancelAnswers = lr.created, lr.paidN, lr.refused, lr.cancelled
	answered := lr.answered
	lr.mu.Unlock()
	lr.run.mu.Lock()
	for _, e := range lr.events {
		if strings.HasPrefix(e.What, "VIOLATION: ") {
			bad("%s", strings.TrimPrefix(e.What, "VIOLATION: "))
		}
	}
	lr.run.mu.Unlock()

	db := lr.db
	if err := db.QueryRowContext(ctx, "SELECT stock, sold, total_stock FROM skus WHERE id = ?", lr.skuID).Scan(&res.Stock, &res.Sold, &res.Total); err != nil {
		bad("read sku: %v", err)
		return
	}
	res.Orders = map[string]int64{}
	rows, err := db.QueryContext(ctx, "SELECT id, status, quantity FROM orders WHERE sku_id = ?", lr.skuID)
	if err != nil {
		bad("read orders: %v", err)
		return
	}
	status := map[int64]string{}
	for rows.Next() {
		var (
			id, qty int64
			st      string
		)
		if err := rows.Scan(&id, &st, &qty); err != nil {
			bad("scan: %v", err)
			break
		}
		status[id] = st
		res.Orders[st]++
		switch st {
		case "paid":
			res.PaidSum += qty
		case "pending":
			res.PendingUnits += qty
		}
	}
	rows.Close()
	if res.PaidSum != lr.cfg.Units || res.Sold != lr.cfg.Units || res.Stock != 0 || res.Total != lr.cfg.Units {
		bad("paid units %d, sold %d, stock %d, total %d; want %d paid and sold, none left", res.PaidSum, res.Sold, res.Stock, res.Total, lr.cfg.Units)
	}
	if res.Stock+res.Sold != res.Total || res.Sold != res.PaidSum+res.PendingUnits {
		bad("stock %d + sold %d != total %d, or sold != paid %d + pending %d", res.Stock, res.Sold, res.Total, res.PaidSum, res.PendingUnits)
	}
	if int64(len(status)) != res.Created {
		bad("%d orders in the database; %d created answers", len(status), res.Created)
	}
	for id, said := range answered {
		internal, ok := lr.orderIDs.Decode(id)
		if !ok {
			bad("order id %q does not decode", id)
			continue
		}
		got := status[internal]
		// An order left pending by its buyer (abandoned) is expired now;
		// one whose cancel got no answer is cancelled or expired.
		if (said == "pending" || said == cancelUnknown) && got == "expired" || said == cancelUnknown && got == "cancelled" {
			continue
		}
		if got != said {
			bad("order %d: the client was told %s; the database says %s", internal, said, got)
		}
	}
	var held, live, over int64
	_ = db.QueryRowContext(ctx, "SELECT COALESCE(SUM(quantity), 0) FROM user_purchases WHERE sku_id = ?", lr.skuID).Scan(&held)
	_ = db.QueryRowContext(ctx, "SELECT COALESCE(SUM(quantity), 0) FROM orders WHERE sku_id = ? AND status IN ('pending', 'paid')", lr.skuID).Scan(&live)
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE sku_id = ? AND status IN ('pending', 'paid')
		GROUP BY user_id HAVING SUM(quantity) > 1) x`, lr.skuID).Scan(&over)
	if held != live || over != 0 {
		bad("holdings %d units, live orders %d, users over the limit %d", held, live, over)
	}
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders WHERE sku_id = ? AND status = 'paid' AND created_at >
		(SELECT MIN(settled_at) FROM orders WHERE sku_id = ? AND status = 'expired')`, lr.skuID, lr.skuID).Scan(&res.ResoldAfterExpiry)
	if res.Orders["expired"] == 0 || res.ResoldAfterExpiry == 0 {
		bad("%d orders expired, %d paid orders created after the first expiry: returned units were not resold", res.Orders["expired"], res.ResoldAfterExpiry)
	}
	res.Violations = append(res.Violations, lr.audit(ctx)...)
	for _, i := range *lr.live.Load() {
		v, _ := lr.metric(ctx, i, `seckill_sweep_seconds_count{outcome="stale_fence"} `)
		res.StaleSweeps += int64(v)
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
