package harness

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// scenario is how a scenario other than the sale (invented-skus,
// lifecycle, idle-restock, fair, waitlist) starts.
type scenario struct {
	name         string
	minInstances int      // the least it can run on
	conns        int      // idle connections kept to each instance (0: Go's default)
	units        int64    // its SKU's stock, per-user limit 1 (0: no SKU)
	soldOut      bool     // the SKU must end sold out
	env          []string // for every instance
	fault        string   // the fault it strikes itself (waitlist), "" for none
}

// start brings up the scenario on cfg's instances, database, binary and
// k6: a private Redis, the instances and its SKU. The caller defers stop
// at once, whatever the error: what was started is stopped.
func (sc scenario) start(ctx context.Context, cfg Config) (*run, error) {
	c := Default()
	c.Instances, c.MySQLDSN, c.ServiceBin, c.K6, c.Keep, c.Log = cfg.Instances, cfg.MySQLDSN, cfg.ServiceBin, cfg.K6, cfg.Keep, cfg.Log
	c.SoldOutBound, c.FaultFor, c.Env, c.ExpectSoldOut = cfg.SoldOutBound, cfg.FaultFor, sc.env, sc.soldOut
	c.Fault, c.Events = cmp.Or(sc.fault, FaultNone), cfg.Events && sc.units > 0 // events of a SKU's orders
	cfg, err := normalize(c)
	if err != nil {
		return nil, err
	}
	if cfg.Instances < sc.minInstances {
		return nil, fmt.Errorf("-scenario %s needs %d or more instances, not %d", sc.name, sc.minInstances, cfg.Instances)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if sc.conns > 0 {
		client.Transport = &http.Transport{MaxIdleConnsPerHost: sc.conns}
	}
	r, err := newRun(cfg, time.Now().Format("20060102-150405")+"-"+sc.name, client)
	if err == nil {
		err = r.bringUp(ctx)
	}
	if err == nil && sc.units > 0 {
		r.skuID, err = r.createSKU(ctx, sc.name, sc.units, 1)
		r.skuIDs = []int64{r.skuID}
	}
	return r, err
}

// stop tears down what start started, if anything.
func (r *run) stop() {
	if r != nil {
		r.tearDown()
	}
}

// ScenarioResult is what a scenario other than the sale found: its
// findings, one a line, and every violation.
type ScenarioResult struct {
	Lines      []string
	Violations []string
}

func (s *ScenarioResult) line(format string, args ...any) {
	s.Lines = append(s.Lines, fmt.Sprintf(format, args...))
}

func (s *ScenarioResult) bad(format string, args ...any) {
	s.Violations = append(s.Violations, fmt.Sprintf(format, args...))
}

// Pass reports whether every check held.
func (s ScenarioResult) Pass() bool { return len(s.Violations) == 0 }

// WriteText prints the findings, then PASS or each violation.
func (s ScenarioResult) WriteText(w io.Writer) {
	for _, l := range s.Lines {
		fmt.Fprintln(w, l)
	}
	if s.Pass() {
		fmt.Fprintln(w, "PASS")
	}
	for _, v := range s.Violations {
		fmt.Fprintln(w, "FAIL:", v)
	}
}

// scriptLimit bounds a scenario's k6 script, whose own maxDuration is
// 10 minutes at most.
const scriptLimit = 11 * time.Minute

// checkScript holds the run's SKU, which started with stock units, to
// what k6's clients were told (see checkAnswers) and to k6's thresholds.
func (r *run) checkScript(ctx context.Context, res *ScenarioResult, k6res k6Result, stock int64) error {
	cons, err := readConsole(k6res.Console, r.orderIDs, &r.restocks)
	if err != nil {
		return err
	}
	ks, err := readK6Summary(k6res.Summary)
	if err != nil {
		return err
	}
	for _, v := range k6Violations(ks.failedThresholds(), k6res.ExitCode) {
		res.bad("%s", v)
	}
	for _, u := range cons.Unexpected {
		res.line("  unexpected    %s", u)
	}
	return r.checkAnswers(ctx, res, stock, cons.Clients, cons.Attempts)
}

// checkAnswers runs the sale's checks of the run's SKU (checkSKU), the
// audit and the events' (checkStream), and adds their findings to res.
func (r *run) checkAnswers(ctx context.Context, res *ScenarioResult, stock int64, clients verify.Clients, attempts []verify.Attempt) error {
	c, err := r.checkSKU(ctx, r.skuID, stock, &clients, attempts)
	if err != nil {
		return err
	}
	audit := r.audit(ctx)
	stream, vs := r.checkStream(ctx)
	s := Summary{Database: c.dbRep, API: c.apiRep, History: &c.history, Acknowledged: len(clients.Acknowledged),
		Unanswered: len(clients.Unsure), RefusedAfterUnknown: len(clients.Refused), Stream: stream}
	s.writeFindings(res.line)
	for _, v := range append(c.violations, vs...) {
		res.bad("%s", v)
	}
	res.Violations = append(res.Violations, audit...)
	res.line("  results       %s", r.dir)
	return nil
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
