package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/internal/toolchain"
	"github.com/seckill/seckill/loadtest/verify"
	"github.com/seckill/seckill/lock/locktest"
)

// k6Result is where a k6 run left its output.
type k6Result struct {
	ExitCode int
	Summary  string // --summary-export JSON
	Console  string // console.log lines of sale.js
	Stdout   string
}

// k6ThresholdsFailed is k6's exit code when a threshold failed.
const k6ThresholdsFailed = 99

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// runK6 runs the sale, sale.js, with the web dashboard's report exported.
func (r *run) runK6(ctx context.Context) (k6Result, error) {
	cfg := r.cfg
	period := "1s"
	if cfg.Ramp+cfg.Hold > 2*time.Minute {
		period = "5s"
	}
	vars := map[string]string{
		"BASE_URLS":  strings.Join(r.baseURLs, ","),
		"SKU_IDS":    r.skuList(),
		"RUN_ID":     "lt" + randomHex(4), // short: user ids and keys are built on it
		"FAULT":      cfg.Fault,
		"START_RATE": strconv.Itoa(cfg.StartRate),
		"RATE":       strconv.Itoa(cfg.Rate),
		"RAMP":       cfg.Ramp.String(),
		"HOLD":       cfg.Hold.String(),
		"PRE_VUS":    strconv.Itoa(min(cfg.MaxVUs, max(50, cfg.Rate/10))),
		"MAX_VUS":    strconv.Itoa(cfg.MaxVUs),
		"P95_MS":     ms(cfg.P95),
		"P99_MS":     ms(cfg.P99),
		// -restocks: k6 restocks to a quarter of the stock (at least one
		// unit) each time the SKU sells out, while the arrivals last.
		"RESTOCKS":       strconv.Itoa(cfg.Restocks),
		"RESTOCK_UNITS":  strconv.FormatInt(max(1, cfg.Stock/4), 10),
		"RESTOCK_FOR_MS": ms(cfg.Ramp + cfg.Hold),
	}
	r.event("k6: %d → %d orders/s over %s, hold %s, %d instance(s), fault %s",
		cfg.StartRate, cfg.Rate, cfg.Ramp, cfg.Hold, len(r.baseURLs), cfg.Fault)
	// k6 ends by itself after ramp + hold + its graceful stop; the bound
	// catches a wedged run.
	return r.runScript(ctx, "sale.js", "k6", cfg.Ramp+cfg.Hold+3*time.Minute, vars,
		"K6_WEB_DASHBOARD=true",
		"K6_WEB_DASHBOARD_PORT=-1", // no listener; export only
		"K6_WEB_DASHBOARD_PERIOD="+period,
		"K6_WEB_DASHBOARD_EXPORT="+filepath.Join(r.dir, "report.html"),
		"SHOPPER_SECRET="+r.shopper, // in the environment, not on k6's command line
		"ADMIN_TOKEN="+r.token)
}

// runScript runs loadtest/<script> with k6, vars on its command line and
// env (secrets) in its environment, for at most limit, and leaves
// <name>-summary.json, <name>-console.log (the clients' record) and
// <name>.txt in the results. A failed threshold is an exit code, not an
// error.
func (r *run) runScript(ctx context.Context, script, name string, limit time.Duration, vars map[string]string, env ...string) (k6Result, error) {
	res := k6Result{
		Summary: filepath.Join(r.dir, name+"-summary.json"),
		Console: filepath.Join(r.dir, name+"-console.log"),
		Stdout:  filepath.Join(r.dir, name+".txt"),
	}
	k6, err := toolchain.EnsureK6(ctx, r.cfg.K6, r.log)
	if err != nil {
		return res, err
	}
	args := []string{"run", "--no-usage-report", "--no-color", "--console-output", res.Console, "--summary-export", res.Summary}
	for k, v := range vars {
		args = append(args, "-e", k+"="+v)
	}
	p := &locktest.Process{Path: k6, Args: append(args, filepath.Join(r.cfg.moduleRoot, "loadtest", script)),
		Log: res.Stdout, Env: append(os.Environ(), env...)}
	r.procs = append(r.procs, p)
	if err := p.Launch(); err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err = p.Wait(wctx)
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	default:
		p.Kill()
		return res, fmt.Errorf("k6 %s: %w (see %s)", script, err, res.Stdout)
	}
	r.event("k6 %s finished: exit %d", script, res.ExitCode)
	if _, serr := os.Stat(res.Summary); serr != nil {
		return res, fmt.Errorf("k6 %s exited %d without a summary (see %s)", script, res.ExitCode, res.Stdout)
	}
	return res, nil
}

// consoleLog is what a script wrote to the console: the clients' record.
type consoleLog struct {
	Clients     verify.Clients
	Attempts    []verify.Attempt // every order request, for the history
	Unavailable []time.Time      // 503s and dropped connections
	Unexpected  []string         // samples of answers outside the contract

	// lifecycle.js's: each order's last answer (by the id its buyer was
	// told), the answers by status, the cancels (the order id in Key).
	said    map[string]string
	told    map[string]int
	cancels []verify.Op
}

// readConsole parses k6's console output, whose lines look like
// time="..." level=info msg="ack 123 user" source=console; its restocks
// go to restocks.
func readConsole(path string, ids *orderid.Codec, restocks *restockLog) (consoleLog, error) {
	c := consoleLog{said: map[string]string{}, told: map[string]int{}}
	err := scanConsole(path, func(msg string) error { return c.add(msg, ids, restocks) })
	return c, err
}

// add takes one console message (see sale.js and lifecycle.js).
func (c *consoleLog) add(msg string, ids *orderid.Codec, restocks *restockLog) error {
	f := strings.Fields(msg)
	if len(f) == 0 {
		return nil
	}
	switch {
	case f[0] == "hist":
		a, err := parseAttempt(msg, ids)
		c.Attempts = append(c.Attempts, a)
		return err
	case f[0] == "restock":
		return restocks.parse(msg)
	case f[0] == "ack" && len(f) == 3:
		id, ok := ids.Decode(f[1])
		if !ok {
			return fmt.Errorf("console: ack %q: not an order id of this service", msg)
		}
		c.Clients.Acknowledged = append(c.Clients.Acknowledged, verify.Ack{OrderID: id, UserID: f[2]})
		c.said[f[1]] = "pending"
		c.told["pending"]++
	case f[0] == "said" && len(f) == 3:
		c.said[f[1]] = f[2]
		c.told[f[2]]++
	case f[0] == "cancel":
		var call, ret int64
		var inst int
		op := verify.Op{Kind: verify.Returned, Qty: 1}
		if _, err := fmt.Sscanf(msg, "cancel %d %d %s %s %d %d", &call, &ret, &op.Key, &op.User, &inst, &op.Status); err != nil {
			return fmt.Errorf("console: %q: %w", msg, err)
		}
		op.Instance, op.Call, op.Return = instanceName(inst), time.UnixMilli(call), time.UnixMilli(ret).Add(time.Millisecond)
		c.cancels = append(c.cancels, op)
	case f[0] == "unsure" && len(f) == 2:
		c.Clients.Unsure = append(c.Clients.Unsure, f[1])
	case f[0] == "refused" && len(f) == 4:
		c.Clients.Refused = append(c.Clients.Refused, verify.Refusal{Key: f[1], UserID: f[2], Code: f[3]})
	case f[0] == "unavail" && len(f) >= 2:
		msec, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return fmt.Errorf("console: bad unavail %q", msg)
		}
		c.Unavailable = append(c.Unavailable, time.UnixMilli(msec))
	case f[0] == "unexpected" && len(c.Unexpected) < 20:
		c.Unexpected = append(c.Unexpected, msg)
	}
	return nil
}

// consoleMsg extracts msg="..." from a logrus text line, or returns the
// line when it is not one.
func consoleMsg(line string) string {
	i := strings.Index(line, `msg="`)
	if i < 0 {
		return line
	}
	rest := line[i+4:]
	if s, err := strconv.QuotedPrefix(rest); err == nil {
		u, _ := strconv.Unquote(s) // a quoted prefix unquotes
		return u
	}
	return strings.Trim(rest, `"`)
}

// k6Summary is the part of --summary-export the runner reads: each
// metric's figures and its thresholds, true when failed.
type k6Summary struct {
	Metrics map[string]k6Metric `json:"metrics"`
}

type k6Metric struct {
	Count, Rate, Med, Max float64
	P95                   float64         `json:"p(95)"`
	P99                   float64         `json:"p(99)"`
	Thresholds            map[string]bool `json:"thresholds"`
}

func readK6Summary(path string) (k6Summary, error) {
	var s k6Summary
	raw, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// failedThresholds lists the thresholds k6 marked failed.
func (s k6Summary) failedThresholds() []string {
	var failed []string
	for name, m := range s.Metrics {
		for expr, bad := range m.Thresholds {
			if bad {
				failed = append(failed, name+": "+expr)
			}
		}
	}
	sort.Strings(failed)
	return failed
}
