package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// The lifecycle run (-scenario lifecycle): buyers of whom 60% pay, 10%
// cancel, 20% never pay and 10% pay too late keep coming, lifecycleBuyers
// at a time, until every unit is paid, which only the returned units make
// possible. Mid-run the sweeper's leader is frozen (SIGSTOP) past its
// lease, the instance that takes the lease over is killed (SIGKILL), and
// the frozen one resumes.
const (
	lifecycleBuyers   = 32
	paymentTimeout    = 3 * time.Second
	leaderFreeze      = 6 * time.Second // lock.ttl is 3s
	lifecycleDeadline = 5 * time.Minute // the whole sale
)

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
	writeVerdict(w, r.Violations)
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
	units    int64
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

// RunLifecycle starts the database, a private Redis and cfg's instances
// (3 or more), sells units (default 1,000) with its faults, and verifies
// the outcome in the database.
func RunLifecycle(ctx context.Context, cfg Config, units int64) (res LifecycleResult, err error) {
	orDefault(&units, 1000)
	payToken := randomHex(16)
	base, err := scenarioConfig(cfg,
		"SECKILL_AUTH_SHOPPER=none", // buyers are named in the body; the opaque order id is the cancel's key
		"SECKILL_ORDER_PAYMENT_TIMEOUT="+paymentTimeout.String(),
		"SECKILL_AUTH_PAYMENT_TOKENS="+payToken)
	if err != nil {
		return res, err
	}
	if base.Instances < 3 {
		return res, fmt.Errorf("the lifecycle run freezes one instance and kills another: it needs 3 or more, not %d", base.Instances)
	}
	r, err := startScenario(ctx, base, "lifecycle", 256)
	defer r.tearDown()
	if err != nil {
		return res, err
	}
	lr := &lifecycleRun{run: r, units: units, payToken: payToken, answered: map[string]string{}, history: newGoHistory()}
	all := make([]int, len(r.instances))
	for i := range all {
		all[i] = i
	}
	lr.live.Store(&all)
	if r.skuID, err = r.createSKU(ctx, "lifecycle", units, 1); err != nil {
		return res, err
	}
	start := time.Now()
	if err := lr.sell(ctx, &res); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	if err := lr.waitSettled(ctx); err != nil {
		res.Violations = append(res.Violations, err.Error())
	}
	lr.verify(ctx, &res)
	if res.History, err = lr.checkGoHistory(ctx, lr.history, r.skuID, units, 1, res.Stock); err != nil {
		return res, err
	}
	res.Violations = append(res.Violations, historyViolations(res.History)...)
	return res, nil
}

// sell runs the buyers until every unit is paid, the faults beside them.
func (lr *lifecycleRun) sell(ctx context.Context, res *LifecycleResult) error {
	sctx, cancel := context.WithTimeout(ctx, lifecycleDeadline)
	defer cancel()
	faults := make(chan error, 1)
	go func() { faults <- lr.injectFaults(sctx, res) }()
	var late sync.WaitGroup
	var wg sync.WaitGroup
	for client := range lifecycleBuyers {
		wg.Go(func() { lr.buy(sctx, client, &late) })
	}
	wg.Wait()
	late.Wait()
	cancel()
	return <-faults
}

// instanceFor is the base URL and name of a live instance for buyer k.
func (lr *lifecycleRun) instanceFor(k int64) (string, string) {
	live := *lr.live.Load()
	i := live[int(k)%len(live)]
	return lr.baseURLs[i], fmt.Sprintf("instance-%d", i)
}

// buy runs buyers one after another until every unit is paid or ctx ends.
func (lr *lifecycleRun) buy(ctx context.Context, client int, late *sync.WaitGroup) {
	for lr.paid.Load() < lr.units && ctx.Err() == nil {
		k := lr.buyers.Add(1)
		user := fmt.Sprintf("buyer-%d", k)
		url, instance := lr.instanceFor(k)
		call := time.Now()
		p, err := lr.order(ctx, url, user, "", "")
		ret := time.Now()
		var o orderAnswer
		if err == nil {
			o = p.answer()
		}
		id, _ := lr.orderIDs.Decode(o.OrderID)
		lr.history.order(client, instance, user, call, ret, p.status, o.Error.Code, id, err)
		if err != nil || p.status != http.StatusCreated {
			// Sold out until units come back, or an instance going away:
			// the buyer's back-off, bounded by the sale's deadline.
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		if o.Status != "pending" || id == 0 {
			lr.violation("a new order answered %s; want pending with expires_at", p.body)
			continue
		}
		lr.note(o.OrderID, "pending", func() { lr.created++ })
		lr.follow(ctx, k, user, id, o, late)
	}
}

// follow does what buyer k's fate says with its new order.
func (lr *lifecycleRun) follow(ctx context.Context, k int64, user string, id int64, o orderAnswer, late *sync.WaitGroup) {
	switch fateOfBuyer(k) {
	case fatePays:
		lr.pay(ctx, k, o.OrderID, false)
	case fateCancels:
		lr.cancel(ctx, k, user, id, o.OrderID)
	case fatePaysLate:
		late.Go(func() {
			sleepCtx(ctx, time.Until(o.ExpiresAt)+20*time.Millisecond) // the buyer comes back after the window
			lr.pay(context.WithoutCancel(ctx), k, o.OrderID, true)
		})
	}
}

// cancel cancels buyer k's order and records it.
func (lr *lifecycleRun) cancel(ctx context.Context, k int64, user string, id int64, orderID string) {
	url, instance := lr.instanceFor(k)
	call := time.Now()
	p, err := lr.post(ctx, url+"/api/v1/orders/"+orderID+"/cancel", "", "", "")
	status := p.status
	if err != nil {
		status = 0
	}
	lr.history.cancel(id, user, instance, call, time.Now(), status)
	switch {
	case err == nil && status == http.StatusOK:
		lr.note(orderID, "cancelled", func() { lr.cancelled++ })
	case err == nil && status != http.StatusServiceUnavailable:
		lr.violation("cancel of a pending order = %d %s", status, p.body)
	default: // no answer, or 503: the cancel may or may not have landed
		lr.note(orderID, cancelUnknown, func() {})
	}
}

// pay confirms a payment as the payment system does, retrying a 503 or a
// lost answer (it is idempotent) a few times.
func (lr *lifecycleRun) pay(ctx context.Context, k int64, id string, tooLate bool) {
	for attempt := range 5 {
		url, _ := lr.instanceFor(k + int64(attempt))
		p, err := lr.post(ctx, url+"/internal/v1/orders/"+id+"/paid", "", lr.payToken, "")
		if err != nil || p.status == http.StatusServiceUnavailable {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		switch {
		case p.status == http.StatusOK && !tooLate:
			lr.note(id, "paid", func() { lr.paidN++ })
			lr.paid.Add(1)
		case p.status == http.StatusConflict && p.answer().Error.Code == "order_expired":
			lr.note(id, "expired", func() { lr.refused++ })
		default:
			lr.violation("payment (too late: %v) = %d %s", tooLate, p.status, p.body)
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
	lr.event("FAULT: SIGSTOP %s, the sweeper's leader, for %s (past its lease)", res.Frozen, leaderFreeze)
	if lr.instances[frozen].signal(syscall.SIGSTOP, 0) {
		return fmt.Errorf("%s: gone instead of frozen", res.Frozen)
	}
	resumeAt := time.Now().Add(leaderFreeze)
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
			if v, _, _ := lr.metric(ctx, i, "seckill_sweeper_leader "); v == 1 {
				who = i
				return nil
			}
		}
		return fmt.Errorf("no live instance leads the sweeper")
	})
	return who, err
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
