package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"text/tabwriter"
)

// row is what one case measured.
type row struct {
	Case          string  `json:"case"`
	Variant       string  `json:"variant,omitempty"` // the A/B side; "" is the worktree's default
	Load          string  `json:"load"`              // "1000 VUs" or "2000/s"
	VUs           int     `json:"vus"`
	Rate          int     `json:"rate,omitempty"`
	Dropped       int64   `json:"dropped_arrivals,omitempty"` // open load: arrivals k6 could not start
	Seconds       float64 `json:"seconds"`
	Requests      int64   `json:"requests"`
	Orders        int64   `json:"orders"`
	Rejects       int64   `json:"rejects"`
	Unavailable   int64   `json:"unavailable"` // 503: in the contract, but a sign of collapse
	Unexpected    int64   `json:"unexpected"`
	OrdersPerSec  float64 `json:"orders_per_s"`
	RejectsPerSec float64 `json:"rejects_per_s"`
	ReqPerSec     float64 `json:"req_per_s"`
	P50, P95, P99 float64 // ms
	SQLPerOrder   float64 `json:"sql_statements_per_order"`
	SQLPerReject  float64 `json:"sql_statements_per_reject"`
	RedisPerReq   float64 `json:"redis_commands_per_request"`
	Batches       int64   `json:"batches"`
	RSSMB         float64 `json:"rss_peak_mb"`
	Held          int     `json:"held_connections,omitempty"` // -held rows: the connections held
	IdleKBPerConn float64 `json:"idle_kb_per_connection,omitempty"`
	Verified      string  `json:"verified"`
	// Unpublished is -events' backlog when the row ended: the events
	// whose relay work, and the broker's, fell outside the row's CPU.
	Unpublished int64   `json:"events_unpublished,omitempty"`
	CPU         cpuCost `json:"cpu"`
	LoadAvg     string  `json:"loadavg_before"`
}

// readSummary fills r from k6's handleSummary JSON.
func readSummary(path string, r *row) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("k6 summary: %w", err)
	}
	var s struct {
		State   struct{ TestRunDurationMs float64 } `json:"state"`
		Metrics map[string]struct {
			Values map[string]float64 `json:"values"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("k6 summary: %w", err)
	}
	count := func(m string) int64 { return int64(s.Metrics[m].Values["count"]) }
	r.Seconds = s.State.TestRunDurationMs / 1000
	r.Requests = count("http_reqs")
	r.Orders = count("orders_created")
	r.Rejects = count("orders_rejected")
	r.Unavailable = count("unavailable")
	r.Unexpected = count("unexpected_status")
	r.Dropped = count("dropped_iterations")
	d := s.Metrics["http_req_duration"].Values
	r.P50, r.P95, r.P99 = d["p(50)"], d["p(95)"], d["p(99)"]
	if r.Seconds > 0 {
		r.OrdersPerSec = float64(r.Orders) / r.Seconds
		r.RejectsPerSec = float64(r.Rejects) / r.Seconds
		r.ReqPerSec = float64(r.Requests) / r.Seconds
	}
	return nil
}

// writeTable prints the run's tables: every row, their CPU, the ratios
// (each goal beside it) and the A/B sides.
func writeTable(w io.Writer, rows []row, o options) {
	fmt.Fprintf(w, "Machine: %d CPUs (%s/%s), MariaDB and Redis on loopback, k6 on the same box, %s per run.\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, o.duration)
	fmt.Fprintln(w, "Absolute figures move with the machine's load; compare the ratios, measured in the same run.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | load | orders/s | rejects/s | 503s | other | p50 ms | p95 ms | p99 ms | SQL stmts/order | SQL stmts/reject | Redis cmds/req | batches | peak RSS MB | verified |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		per := r.OrdersPerSec
		if r.Case == caseCeiling {
			per = r.ReqPerSec
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | %d | %d | %.1f | %.1f | %.1f | %s | %s | %.2f | %d | %.0f | %s |\n",
			caseLabel(r), r.Load, per, r.RejectsPerSec, r.Unavailable, r.Unexpected, r.P50, r.P95, r.P99, stat(r.SQLPerOrder), stat(r.SQLPerReject), r.RedisPerReq, r.Batches, r.RSSMB, r.Verified)
	}
	fmt.Fprintln(w)
	writeCPUTable(w, rows, o)
	fmt.Fprintln(w)
	var t tabwriter.Writer
	t.Init(w, 0, 4, 2, ' ', 0)
	writeRatios(&t, rows, o)
	writeCPURatios(&t, rows, o)
	t.Flush()
	writeAB(w, rows)
}

// finder returns the run of a case at a closed load of vus on the
// default side, or the mean of its runs.
type finder func(name string, vus int) *row

func meanRuns(rows []row) finder {
	return func(name string, vus int) *row {
		var mean row
		n := 0
		for _, r := range rows {
			if r.Case == name && r.VUs == vus && r.Rate == 0 && r.Held == 0 && r.Variant == "" {
				n++
				mean.OrdersPerSec += r.OrdersPerSec
				mean.RejectsPerSec += r.RejectsPerSec
				mean.ReqPerSec += r.ReqPerSec
				mean.P99 += r.P99
				mean.Orders, mean.Batches = r.Orders, r.Batches
				mean.SQLPerReject = r.SQLPerReject
			}
		}
		if n == 0 {
			return nil
		}
		f := float64(n)
		mean.OrdersPerSec, mean.RejectsPerSec, mean.ReqPerSec, mean.P99 = mean.OrdersPerSec/f, mean.RejectsPerSec/f, mean.ReqPerSec/f, mean.P99/f
		return &mean
	}
}

// ratio is f(a) / f(b), "n/a" without both.
func ratio(a, b *row, f func(*row) float64) string {
	if a == nil || b == nil || f(b) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", f(a)/f(b))
}

func orders(r *row) float64 { return r.OrdersPerSec }
func reqs(r *row) float64   { return r.ReqPerSec }
func p99(r *row) float64    { return r.P99 }

// writeRatios prints the throughput and latency ratios of the same run,
// each beside its goal (docs/performance.md).
func writeRatios(t io.Writer, rows []row, o options) {
	find := meanRuns(rows)
	hi, lo := o.vus, o.lowVUs
	ceil := find(caseCeiling, hi)
	locked := find("locked", hi)
	sold := find("locked, sold out", hi)
	many := find(fmt.Sprintf("locked, %d SKUs", o.skus), hi)
	fmt.Fprintln(t, "ratio (same run; the ceiling is the mean of its runs)\tmeasured\tgoal")
	fmt.Fprintf(t, "locked / per-request, orders/s @%d\t%s\t≥ 30×\n", hi, ratio(locked, find("per-request", hi), orders))
	fmt.Fprintf(t, "locked / conditional, orders/s @%d\t%s\t≥ 5×\n", hi, ratio(locked, find("conditional", hi), orders))
	fmt.Fprintf(t, "locked / optimistic, orders/s @%d\t%s\t\n", hi, ratio(locked, find("optimistic", hi), orders))
	fmt.Fprintf(t, "locked / pessimistic, orders/s @%d\t%s\t\n", hi, ratio(locked, find("pessimistic", hi), orders))
	if locked != nil && ceil != nil && ceil.ReqPerSec > 0 {
		fmt.Fprintf(t, "locked orders/s / ceiling req/s @%d\t%.2f×\t≥ 0.8×\n", hi, locked.OrdersPerSec/ceil.ReqPerSec)
	}
	if sold != nil && ceil != nil && ceil.ReqPerSec > 0 {
		fmt.Fprintf(t, "sold-out rejects/s / ceiling req/s @%d\t%.2f×\t≥ 0.9×\n", hi, sold.RejectsPerSec/ceil.ReqPerSec)
	}
	fmt.Fprintf(t, "locked p99 / ceiling p99 @%d\t%s\t≤ 2×\n", hi, ratio(locked, ceil, p99))
	fmt.Fprintf(t, "sold-out p99 / ceiling p99 @%d\t%s\t≤ 2×\n", hi, ratio(sold, ceil, p99))
	fmt.Fprintf(t, "locked orders/s @%d / @%d (flat cost)\t%s\t≥ 0.9×\n", hi, lo, ratio(locked, find("locked", lo), orders))
	fmt.Fprintf(t, "per-request orders/s @%d / @%d\t%s\t(collapse)\n", hi, lo, ratio(find("per-request", hi), find("per-request", lo), orders))
	fmt.Fprintf(t, "conditional orders/s @%d / @%d\t%s\t(collapse)\n", hi, lo, ratio(find("conditional", hi), find("conditional", lo), orders))
	fmt.Fprintf(t, "ceiling req/s @%d / @%d\t%s\t\n", hi, lo, ratio(ceil, find(caseCeiling, lo), reqs))
	fmt.Fprintf(t, "%d SKUs / 1 SKU, orders/s @%d\t%s\t≥ 1×\n", o.skus, hi, ratio(many, locked, orders))
	if on, off := find(caseAccessOn, hi), find(caseAccessOff, hi); on != nil && off != nil {
		fmt.Fprintf(t, "access log on / off, orders/s @%d (log level info)\t%s\t\n", hi, ratio(on, off, orders))
		fmt.Fprintf(t, "access log on / off, p99 @%d (log level info)\t%s\t\n", hi, ratio(on, off, p99))
	}
	writeHeldRatios(t, rows)
	writeTopologyRatios(t, find, hi)
	writeReplicationRatio(t, find, hi)
	writeZooKeeperRatios(t, find(caseZooKeeper, hi), locked, hi)
	if sold != nil {
		fmt.Fprintf(t, "SQL statements per sold-out reject\t%s\t0\n", stat(sold.SQLPerReject))
	}
	if locked != nil && locked.Orders > 0 {
		fmt.Fprintf(t, "orders per batch (one transaction) @%d\t%.1f\t\n", hi, float64(locked.Orders)/float64(max(locked.Batches, 1)))
	}
}

func stat(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.3f", v)
}
