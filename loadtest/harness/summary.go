package harness

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/testenv/eventcheck"
	"github.com/seckill/seckill/loadtest/verify"
	"github.com/seckill/seckill/lock/locktest"
)

// Violation names the runner adds to the verifier's (loadtest/README.md).
const (
	UnavailableOutsideFault  = "unavailable_outside_fault"  // a 503 or dropped connection outside the fault window (the kill to UnavailableGrace after the restart)
	InstanceExited           = "instance_exited"            // a service instance died on its own during the run
	K6Thresholds             = "k6_thresholds"              // k6 reported an answer outside the contract or latency past the bound
	AuditFailed              = "audit"                      // `seckill audit` finds a SKU of the run's database breaking an invariant, or could not read it
	LockInspectionFailed     = "lock_inspection"            // GET /admin/v1/skus/{id}/lock showed a holder without owner or with more than a token prefix, a fence lower than before, or a lock held after the sale
	AcknowledgedWriteMissing = "acknowledged_write_missing" // -fault mysql-failover: a write answered 200/201 is not on the survivor, or none was acknowledged after the failover
	EventsStream             = "events_stream"              // -events: the stream replayed and deduplicated is not the outbox, the outbox breaks an order's chain, or the relay left it unpublished
	BrokerDown               = "broker_down"                // -fault broker: nothing sold while nats-server was down, or the metrics never showed the events waiting
)

// Summary is what a run measured and concluded; it is written as
// summary.json and printed as text (and kept as summary.txt).
type Summary struct {
	Run          string   `json:"run"`
	Mode         string   `json:"mode"` // local or target
	Fault        string   `json:"fault"`
	BaseURLs     []string `json:"base_urls"`
	SKUID        int64    `json:"sku_id"`         // the first SKU with -skus
	SKUCount     int      `json:"skus,omitempty"` // SKUs the stock was spread over
	Stock        int64    `json:"stock"`
	PerUserLimit int64    `json:"per_user_limit"`
	PeakRate     int      `json:"peak_rate"`
	Duration     string   `json:"duration"`
	Machine      string   `json:"machine"` // CPUs and load average before and after

	Requests    int64            `json:"requests"`
	ReqPerSec   float64          `json:"requests_per_second"`
	Dropped     int64            `json:"dropped_iterations"`
	ByStatus    map[string]int64 `json:"by_status"`
	ByCode      map[string]int64 `json:"by_code"`
	Unexpected  int64            `json:"unexpected"`
	Retried     int64            `json:"retried"`
	GaveUp      int64            `json:"gave_up"`
	LatencyMS   Latency          `json:"order_latency_ms"`
	BoundMS     Latency          `json:"order_latency_bound_ms"`
	Thresholds  []string         `json:"failed_thresholds"`
	K6ExitCode  int              `json:"k6_exit_code"`
	UnexpSample []string         `json:"unexpected_samples,omitempty"`

	SoldOutAfter  float64  `json:"sold_out_after_s"`  // k6 start → stock 0; 0 if never
	LongestStall  float64  `json:"longest_stall_s"`   // longest stretch selling < 1% of the stock, before the sell-out
	SellingWindow float64  `json:"selling_window_s"`  // first → last order
	OrdersPerSec  float64  `json:"orders_per_second"` // over the selling window
	Progress      []sample `json:"sold_over_time"`

	FaultStart  float64 `json:"fault_start_s,omitempty"` // since k6 start
	FaultBack   float64 `json:"fault_back_s,omitempty"`
	SoldAtFault int64   `json:"sold_at_fault,omitempty"`
	Victims     string  `json:"fault_victims,omitempty"`
	Unavailable int     `json:"unavailable_answers"`

	// With the mysql-failover fault.
	MySQLMinReplicas *int            `json:"mysql_min_replicas,omitempty"`
	FailoverLost     int             `json:"failover_lost_orders"`
	FailoverOversold int64           `json:"failover_oversold_units"`
	FailoverWrites   *FailoverWrites `json:"failover_writes,omitempty"`

	Outage *BrokerOutage `json:"broker_outage,omitempty"` // -fault broker

	Acknowledged        int            `json:"acknowledged_orders"`
	Unanswered          int            `json:"unanswered_requests"`   // the buyer never learned the outcome
	RefusedAfterUnknown int            `json:"refused_after_unknown"` // keyed, refused after a 503/dropped attempt
	Database            *verify.Report `json:"database,omitempty"`
	API                 *verify.Report `json:"api"`

	History *verify.HistoryVerdict `json:"history,omitempty"` // every answer checked for linearizability
	SKUs    []SKUVerdict           `json:"per_sku,omitempty"` // with several; their sums are in Database, API and History
	Locks   *LockInspection        `json:"lock_inspection,omitempty"`
	Stream  *eventcheck.Report     `json:"order_events,omitempty"` // -events

	Violations []verify.Violation `json:"violations"`
	Pass       bool               `json:"pass"`
	Events     []string           `json:"events"`
}

// Latency is in milliseconds.
type Latency struct {
	P50 float64 `json:"p50,omitempty"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max,omitempty"`
}

// settle waits until the SKU's numbers stop moving (requests whose client
// gave up may still be in a queue), at most 30s.
func (r *run) settle(ctx context.Context) {
	last := [2]int64{-1, -1}
	_ = locktest.Poll(ctx, "the sale settled", 30*time.Second, time.Second, func(ctx context.Context) error {
		stock, sold, err := r.stockReading(ctx)
		now := [2]int64{stock, sold}
		if err == nil && now == last {
			return nil
		}
		last = now
		return fmt.Errorf("stock and sold still moving: %v", now) // or unread: verify says what they are
	})
}

// verify settles the sale and fills its summary: k6's figures, the
// clients' record, what the monitor saw, then every check.
func (r *run) verify(ctx context.Context, k6Start time.Time, k6res k6Result) (Summary, error) {
	r.settle(ctx)
	s := r.newSummary(k6res)
	ks, err := readK6Summary(k6res.Summary)
	if err != nil {
		return s, err
	}
	s.addK6(ks)
	cons, err := readConsole(k6res.Console, r.orderIDs, &r.restocks)
	if err != nil {
		return s, err
	}
	s.Acknowledged, s.Unanswered, s.RefusedAfterUnknown = len(cons.Clients.Acknowledged), len(cons.Clients.Unsure), len(cons.Clients.Refused)
	s.Unavailable, s.UnexpSample = len(cons.Unavailable), cons.Unexpected
	s.addMonitor(r.monitor, k6Start, r.cfg.Stock)
	if err := r.checkSKUs(ctx, &s, cons); err != nil {
		return s, err
	}
	if r.myfail != nil {
		// Each order of the sale is one unit (sale.js buys quantity 1).
		s.FailoverLost, s.FailoverOversold = s.Database.Lost, max(0, int64(s.Acknowledged)-r.restocks.totalStock(r.cfg.Stock))
		s.MySQLMinReplicas = &r.cfg.MySQLMinReplicas
		fw, err := r.checkFailoverWrites(ctx, r.monitor.faultBack)
		if err != nil {
			return s, err
		}
		s.FailoverWrites = &fw
		s.Violations = append(s.Violations, fw.violations()...)
	}
	if r.cfg.Fault == FaultBroker && !r.monitor.faultBack.IsZero() {
		s.Outage = &r.monitor.outage
		s.Violations = append(s.Violations, s.Outage.violations(r.cfg.FaultFor)...)
	}
	s.Violations = append(s.Violations, violationsOf(AuditFailed, r.audit(ctx)...)...)
	var vs []verify.Violation
	s.Stream, vs = r.checkStream(ctx)
	s.Violations = append(s.Violations, vs...)
	if r.locks != nil {
		r.finishLocks(ctx, r.locks)
		s.Locks = r.locks
		s.Violations = append(s.Violations, r.locks.violations()...)
	}
	if s.SellingWindow > 0 {
		s.OrdersPerSec = round(float64(s.API.Orders)/s.SellingWindow, 0)
	}
	s.Violations = append(s.Violations, r.unavailableOutside(cons.Unavailable)...)
	s.Violations = append(s.Violations, k6Violations(s.Thresholds, k6res.ExitCode)...)
	s.Pass = len(s.Violations) == 0
	for _, e := range r.events {
		s.Events = append(s.Events, fmt.Sprintf("%+.2fs %s", e.At.Sub(k6Start).Seconds(), e.What))
	}
	return s, nil
}

// newSummary is the summary's description of the sale.
func (r *run) newSummary(k6res k6Result) Summary {
	cfg := r.cfg
	mode := "local"
	if cfg.Target {
		mode = "target"
	}
	return Summary{
		Run: r.id, Mode: mode, Fault: cfg.Fault, BaseURLs: r.baseURLs, SKUID: r.skuID, SKUCount: len(r.skuIDs),
		Stock: cfg.Stock, PerUserLimit: cfg.PerUserLimit, PeakRate: cfg.Rate,
		Duration: (cfg.Ramp + cfg.Hold).String(), K6ExitCode: k6res.ExitCode,
		BoundMS: Latency{P95: float64(cfg.P95.Milliseconds()), P99: float64(cfg.P99.Milliseconds())},
		Machine: fmt.Sprintf("%d CPUs, load average %s before, %s after", runtime.NumCPU(), r.loadBefore, loadAverage()),
	}
}

// addK6 takes k6's counts, latencies and failed thresholds.
func (s *Summary) addK6(ks k6Summary) {
	count := func(name string) int64 { return int64(ks.Metrics[name].Count) }
	s.Requests, s.ReqPerSec, s.Dropped = count("http_reqs"), ks.Metrics["http_reqs"].Rate, count("dropped_iterations")
	s.Unexpected, s.Retried, s.GaveUp = count("unexpected_status"), count("retried"), count("gave_up")
	s.ByStatus, s.ByCode = map[string]int64{}, map[string]int64{}
	for name := range ks.Metrics {
		if n := count(name); n > 0 {
			if st, ok := strings.CutPrefix(name, "status_"); ok {
				s.ByStatus[st] = n
			} else if code, ok := strings.CutPrefix(name, "code_"); ok {
				s.ByCode[code] = n
			}
		}
	}
	lat := ks.Metrics["http_req_duration{kind:order}"]
	s.LatencyMS = Latency{P50: lat.Med, P95: lat.P95, P99: lat.P99, Max: lat.Max}
	s.Thresholds = ks.failedThresholds()
}

// addMonitor takes what the monitor saw: the progress, the sell-out and
// the fault's window, in seconds since k6 started.
func (s *Summary) addMonitor(m monitorState, k6Start time.Time, stock int64) {
	s.Progress = m.samples
	s.LongestStall = round(longestStall(m.samples, stock), 1)
	if !m.soldOut.IsZero() {
		s.SoldOutAfter = round(m.soldOut.Sub(k6Start).Seconds(), 2)
	}
	if !m.faultStart.IsZero() {
		s.FaultStart = round(m.faultStart.Sub(k6Start).Seconds(), 2)
		s.SoldAtFault = m.faultSold
		s.Victims = m.victims
	}
	if !m.faultBack.IsZero() {
		s.FaultBack = round(m.faultBack.Sub(k6Start).Seconds(), 2)
	}
}

// k6Violations is a failed threshold, or k6 exiting for another reason.
func k6Violations(thresholds []string, exit int) []verify.Violation {
	if len(thresholds) == 0 && (exit == 0 || exit == k6ThresholdsFailed) {
		return nil
	}
	msg := strings.Join(thresholds, "; ")
	if exit != k6ThresholdsFailed && exit != 0 {
		msg = fmt.Sprintf("k6 exited %d (see k6.txt)", exit)
	}
	return []verify.Violation{{Name: K6Thresholds, Message: msg}}
}

// unavailableOutside reports 503s and dropped connections outside the
// fault window.
func (r *run) unavailableOutside(at []time.Time) []verify.Violation {
	m := r.monitor
	from, to := m.faultStart.Add(-time.Second), m.faultBack.Add(r.cfg.UnavailableGrace)
	var outside []time.Time
	for _, t := range at {
		// The broker's loss is no excuse: orders sell on without it.
		if m.faultStart.IsZero() || r.cfg.Fault == FaultBroker || t.Before(from) || t.After(to) {
			outside = append(outside, t)
		}
	}
	if len(outside) == 0 {
		return nil
	}
	sort.Slice(outside, func(i, j int) bool { return outside[i].Before(outside[j]) })
	window := "no fault was injected"
	if !m.faultStart.IsZero() {
		window = fmt.Sprintf("the fault window is %s to %s", from.Format("15:04:05.000"), to.Format("15:04:05.000"))
	}
	return []verify.Violation{{Name: UnavailableOutsideFault, Message: fmt.Sprintf(
		"%d answer(s) 503 or dropped outside the fault, first at %s, last at %s; %s",
		len(outside), outside[0].Format("15:04:05.000"), outside[len(outside)-1].Format("15:04:05.000"), window)}}
}

// longestStall is the longest stretch between the first 1% sold (the
// ramp's gentle start is no stall) and the sell-out in which less than 1%
// of the stock sold: a stuck lock shows even when every invariant holds.
func longestStall(samples []sample, stock int64) float64 {
	limit := max(1, stock/100)
	var live []sample
	for _, x := range samples {
		if x.Sold >= limit && x.Sold < stock {
			live = append(live, x)
		}
	}
	var longest float64
	j := 0
	for i := range live {
		j = max(j, i)
		for j+1 < len(live) && live[j+1].Sold-live[i].Sold < limit {
			j++
		}
		longest = max(longest, live[j].At-live[i].At)
	}
	return longest
}

// loadAverage is the 1-minute load average, for the record: a busy box
// explains slow runs.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// WriteText prints the summary for people.
func (s Summary) WriteText(w io.Writer, dir string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	s.writeSale(p)
	s.writeFindings(p)
	if s.Pass {
		p("  VERDICT       PASS: no oversell, nothing lost or doubled; every invariant holds")
	} else {
		p("  VERDICT       FAIL: %d violation(s)", len(s.Violations))
		for _, v := range s.Violations {
			p("    - %s", v)
			if v.Name == verify.NotSoldOut && s.ByCode["sold_out"] == 0 {
				p("      (no buyer was told sold_out: the load offered fewer buyers than stock; lower -stock, raise -rate or -hold)")
			}
		}
	}
	if dir != "" {
		p("  results       %s (summary.txt, summary.json, report.html, logs)", dir)
	}
}

// writeSale prints what the sale was and what k6 measured.
func (s Summary) writeSale(p func(string, ...any)) {
	p("")
	p("seckill load test %s — %s, fault: %s, %d instance(s)", s.Run, s.Mode, s.Fault, len(s.BaseURLs))
	if s.Machine != "" {
		p("  machine       %s", s.Machine)
	}
	skus := fmt.Sprintf("sku %d, stock %d", s.SKUID, s.Stock)
	if s.SKUCount > 1 {
		skus = fmt.Sprintf("%d SKUs (the first %d), stock %d in all", s.SKUCount, s.SKUID, s.Stock)
	}
	p("  sale          %s, per-user limit %d; arrivals ramp to %d/s over %s", skus, s.PerUserLimit, s.PeakRate, s.Duration)
	p("  requests      %d (%.0f/s), %d retried, %d gave up, %d arrivals dropped by k6 (machine limit)",
		s.Requests, s.ReqPerSec, s.Retried, s.GaveUp, s.Dropped)
	p("  by status     %s", counts(s.ByStatus))
	p("  by code       %s", counts(s.ByCode))
	p("  order latency p50 %s  p95 %s  p99 %s  max %s   (bound: p95 < %s, p99 < %s)",
		msec(s.LatencyMS.P50), msec(s.LatencyMS.P95), msec(s.LatencyMS.P99), msec(s.LatencyMS.Max), msec(s.BoundMS.P95), msec(s.BoundMS.P99))
	if s.SoldOutAfter > 0 {
		p("  sold out      %.1fs after the start; first to last order %.1fs (%.0f orders/s); longest stall %.1fs (< 1%% of the stock sold)",
			s.SoldOutAfter, s.SellingWindow, s.OrdersPerSec, s.LongestStall)
	} else {
		p("  sold out      never")
	}
	if s.Fault != FaultNone {
		p("  fault         %s: %s %s at %.1fs (sold %d), back at %.1fs; %d answers 503/dropped",
			s.Fault, s.Victims, faultVerb(s.Fault), s.FaultStart, s.SoldAtFault, s.FaultBack, s.Unavailable)
	}
	if o := s.Outage; o != nil {
		p("  broker down   %d units sold meanwhile (of %d left); the metrics showed up to %d events waiting, the oldest %.1fs", o.Sold, o.Left, o.Backlog, o.AgeS)
	}
}

// writeFindings prints what the checks read.
func (s Summary) writeFindings(p func(string, ...any)) {
	if d := s.Database; d != nil {
		p("  database      sold %d, stock %d, %d orders holding %d units, %d users, at most %d per user",
			d.SKU.Sold, d.SKU.Stock, d.Orders, d.Units, d.Users, d.MaxPerUser)
	}
	if a := s.API; a != nil {
		p("  api           sold %d, stock %d, %d orders listed", a.SKU.Sold, a.SKU.Stock, a.Orders)
	}
	if len(s.SKUs) > 0 {
		p("  per sku       %s", skuLine(s.SKUs))
	}
	p("  clients       %d orders acknowledged, %d requests left unanswered, %d refused after an unknown outcome",
		s.Acknowledged, s.Unanswered, s.RefusedAfterUnknown)
	if s.MySQLMinReplicas != nil {
		p("  failover      mysql.min_replicas %d: %d acknowledged orders not on the survivor (lost), %d units acknowledged beyond the stock (oversold)",
			*s.MySQLMinReplicas, s.FailoverLost, s.FailoverOversold)
		if *s.MySQLMinReplicas == 0 && !s.Pass {
			p("                the loss this fault demonstrates: with 0 an order is acknowledged at the primary's COMMIT; -mysql-min-replicas 1 waits for a replica")
		}
		if w := s.FailoverWrites; w != nil {
			p("  writes        %s", w)
			p("                answers %s", counts(w.Answers))
		}
	}
	if h := s.History; h != nil {
		p("  history       %s", h)
		if h.Visualization != "" {
			p("                its search drawn in %s", h.Visualization)
		}
	}
	if s.Locks != nil {
		p("  lock inspection: %s", s.Locks)
	}
	if e := s.Stream; e != nil {
		p("  events        %d in the stream (%d distinct), %d in the outbox", e.Messages, e.Distinct, e.Outbox)
	}
	for _, u := range s.UnexpSample {
		p("  unexpected    %s", u)
	}
}

func counts(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+": "+strconv.FormatInt(m[k], 10))
	}
	return strings.Join(parts, "  ")
}

func msec(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', 2, 64) + "s"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + "ms"
}

// faultVerb is what the fault did to its victims.
func faultVerb(fault string) string {
	switch fault {
	case FaultPause:
		return "SIGSTOPped"
	case FaultMySQLFailover:
		return "lost (its replicas stalled first)"
	}
	return "SIGKILLed"
}
