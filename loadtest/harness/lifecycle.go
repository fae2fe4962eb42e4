package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/lock/locktest"
)

// The lifecycle run (-scenario lifecycle, loadtest/README.md):
// lifecycle.js's buyers pay, cancel or abandon until every unit is paid,
// while the sweeper's leader is frozen past its lease and its successor
// killed: process faults, which k6 cannot cause.
const (
	lifecycleBuyers = 32
	paymentTimeout  = 3 * time.Second
	leaderFreeze    = 6 * time.Second // lock.ttl is 3s
)

// RunLifecycle starts the database, a private Redis and cfg's instances,
// sells units (default 1,000) with its faults, and verifies the outcome.
func RunLifecycle(ctx context.Context, cfg Config, units int64) (res ScenarioResult, err error) {
	orDefault(&units, 1000)
	// Three or more instances: one is frozen, another killed. Buyers are
	// named in the body; the opaque order id is the cancel's key.
	sc := scenario{name: "lifecycle", minInstances: 3, units: units, soldOut: true, env: []string{"SECKILL_AUTH_SHOPPER=none",
		"SECKILL_ORDER_PAYMENT_TIMEOUT=" + paymentTimeout.String()}}
	r, err := sc.start(ctx, cfg)
	defer r.stop()
	if err != nil {
		return res, err
	}
	start := time.Now()
	fctx, stopFaults := context.WithCancel(ctx)
	faults := make(chan error, 1)
	var frozen, killed string
	go func() { faults <- r.injectFaults(fctx, &frozen, &killed) }()
	k6res, err := r.runScript(ctx, "lifecycle.js", "k6", scriptLimit, map[string]string{"BASE_URLS": strings.Join(r.baseURLs, ","),
		"SKU_ID": strconv.FormatInt(r.skuID, 10), "VUS": strconv.Itoa(lifecycleBuyers)}, "PAY_TOKEN="+r.payToken)
	stopFaults()
	if ferr := <-faults; err == nil && ferr != nil && fctx.Err() == nil {
		err = fmt.Errorf("fault injection: %w", ferr)
	}
	if err != nil {
		return res, err
	}
	res.line("order lifecycle: %d units, sold in %.1fs; sweeper leader %s frozen past its lease, %s killed", units, time.Since(start).Seconds(), frozen, killed)
	if frozen == "" || killed == "" {
		res.bad("the faults were not injected: the sale ended before an order expired and a sweeper leader could be frozen and its successor killed")
	}
	return res, r.checkLifecycle(ctx, &res, k6res, units)
}

// injectFaults waits for the first expiries, freezes the sweeper's
// leader past its lease, kills the instance that takes the lease over,
// and resumes the frozen one.
func (r *run) injectFaults(ctx context.Context, frozenName, killedName *string) error {
	if err := r.awaitCount(ctx, "the first expiry", 2*time.Minute, func(n int64) bool { return n > 0 },
		"SELECT COUNT(*) FROM orders WHERE status = 'expired'"); err != nil {
		return err
	}
	frozen, err := r.sweeperLeader(ctx, -1)
	if err != nil {
		return err
	}
	r.event("FAULT: SIGSTOP %s, the sweeper's leader, for %s (past its lease)", instanceName(frozen), leaderFreeze)
	if err := r.instances[frozen].Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("%s: %w", instanceName(frozen), err)
	}
	*frozenName = instanceName(frozen)
	resumeAt := time.Now().Add(leaderFreeze)
	defer func() {
		sleepCtx(context.WithoutCancel(ctx), time.Until(resumeAt))
		r.event("FAULT: SIGCONT %s", *frozenName)
		_ = r.instances[frozen].Signal(syscall.SIGCONT) // it was stopped, not gone: killing is the runner's
	}()
	next, err := r.sweeperLeader(ctx, frozen)
	if err != nil {
		return err
	}
	r.event("FAULT: SIGKILL %s, the sweeper's new leader", instanceName(next))
	r.instances[next].Kill()
	*killedName = instanceName(next)
	return nil
}

// sweeperLeader polls the instances (but skip) for the one whose /metrics
// says it holds the sweeper's lease.
func (r *run) sweeperLeader(ctx context.Context, skip int) (int, error) {
	who := -1
	err := locktest.Poll(ctx, "a sweeper leader", time.Minute, 50*time.Millisecond, func(ctx context.Context) error {
		for i := range r.instances {
			if i == skip {
				continue
			}
			if v, _, _ := r.metric(ctx, i, "seckill_sweeper_leader "); v == 1 {
				who = i
				return nil
			}
		}
		return fmt.Errorf("no instance leads the sweeper")
	})
	return who, err
}
