package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// caseLabel names a row in the tables: the case, and its A/B side.
func caseLabel(r row) string {
	if r.Variant == "" {
		return r.Case
	}
	return r.Case + " [" + r.Variant + "]"
}

// cpuRow is the mean of the runs of one case, load and variant.
type cpuRow struct {
	n                   int
	cpu                 cpuCost
	reqPerSec, p50, p99 float64
	orders, batches     int64
	dbCores             float64 // MariaDB's CPU over the row's wall time, in cores
}

func (c cpuRow) perBatch() float64 {
	if c.batches == 0 {
		return 0
	}
	return float64(c.orders) / float64(c.batches)
}

// meanOf averages the rows of name at load on the variant's side.
func meanOf(rows []row, name, load, variant string) *cpuRow {
	var m cpuRow
	for _, r := range rows {
		if r.Case != name || r.Load != load || r.Variant != variant {
			continue
		}
		m.n++
		m.cpu.SvcUS += r.CPU.SvcUS
		m.cpu.DBUS += r.CPU.DBUS
		m.cpu.RedisUS += r.CPU.RedisUS
		m.cpu.BrokerUS += r.CPU.BrokerUS
		m.cpu.K6Share += r.CPU.K6Share
		m.cpu.OtherCores += r.CPU.OtherCores
		m.reqPerSec += r.ReqPerSec
		m.p50 += r.P50
		m.p99 += r.P99
		m.orders += r.Orders
		m.batches += r.Batches
		if r.Seconds > 0 {
			m.dbCores += r.CPU.DBUS * float64(r.Requests) / r.Seconds / 1e6
		}
	}
	if m.n == 0 {
		return nil
	}
	f := float64(m.n)
	m.cpu = cpuCost{SvcUS: m.cpu.SvcUS / f, DBUS: m.cpu.DBUS / f, RedisUS: m.cpu.RedisUS / f, BrokerUS: m.cpu.BrokerUS / f, K6Share: m.cpu.K6Share / f, OtherCores: m.cpu.OtherCores / f}
	m.reqPerSec, m.p50, m.p99, m.dbCores = m.reqPerSec/f, m.p50/f, m.p99/f, m.dbCores/f
	return &m
}

// ceilingCPU is the ceiling's service CPU per request at load: a bare
// HTTP answer, with no database or Redis behind it. A side that ran its
// own ceiling (a Go runtime setting) is measured against that one.
func ceilingCPU(rows []row, load, variant string) float64 {
	if c := meanOf(rows, caseCeiling, load, variant); c != nil {
		return c.cpu.SvcUS
	}
	if c := meanOf(rows, caseCeiling, load, ""); c != nil {
		return c.cpu.SvcUS
	}
	return 0
}

// writeCPUTable prints what every row cost in CPU per answered request,
// against the ceiling's at the same load.
func writeCPUTable(w io.Writer, rows []row, o options) {
	fmt.Fprintln(w, "CPU time per answered request (µs), from /proc/<pid>/stat before and after each row; × ceiling is (service + MariaDB + Redis + broker, -events' nats-server) over the ceiling's service CPU at the same load.")
	fmt.Fprintln(w, "MariaDB is the box's shared server: its counter also counts other work on it (its figure in the ceiling rows, where we send it nothing, is that background).")
	fmt.Fprintln(w, "k6 share is the load generator's part of the box's busy CPU; other cores is the CPU of everything else on the box (other engineers) during the row.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | load | req/s | service | MariaDB | Redis | broker | total | ceiling | × ceiling | p50 ms | p99 ms | orders/batch | k6 share | other cores | load avg |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		ceil := ceilingCPU(rows, r.Load, r.Variant)
		times := "n/a"
		if ceil > 0 && r.Case != caseCeiling {
			times = fmt.Sprintf("%.2f×", r.CPU.Total()/ceil)
		}
		perBatch := ""
		if r.Batches > 0 && r.Orders > 0 {
			perBatch = fmt.Sprintf("%.1f", float64(r.Orders)/float64(r.Batches))
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %.1f | %.1f | %s | %.0f%% | %.2f | %s |\n",
			caseLabel(r), r.Load, r.ReqPerSec, r.CPU.SvcUS, r.CPU.DBUS, r.CPU.RedisUS, r.CPU.BrokerUS, r.CPU.Total(), ceil, times,
			r.P50, r.P99, perBatch, 100*r.CPU.K6Share, r.CPU.OtherCores, r.LoadAvg)
	}
	fmt.Fprintln(w)
}

// writeCPURatios adds the CPU goals (docs/performance.md) to the ratio list.
func writeCPURatios(t *tabwriter.Writer, rows []row, o options) {
	hi := fmt.Sprintf("%d VUs", o.vus)
	open := fmt.Sprintf("%d/s", o.rate)
	times := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	total := func(name, load string) float64 {
		if m := meanOf(rows, name, load, ""); m != nil {
			return m.cpu.Total()
		}
		return 0
	}
	fmt.Fprintf(t, "CPU per order / ceiling's per request, saturated @%s\t%s\t≤ 1.5×\n", hi, times(total("locked", hi), ceilingCPU(rows, hi, "")))
	// The same goal measured two other ways: against a sold-out refusal
	// (the order's HTTP stack, JSON and shopper check, with no I/O), and
	// the service's own CPU alone, without MariaDB's share.
	fmt.Fprintf(t, "CPU per order / sold-out refusal's per request, saturated @%s\t%s\t\n", hi, times(total("locked", hi), total("locked, sold out", hi)))
	if m := meanOf(rows, "locked", hi, ""); m != nil {
		fmt.Fprintf(t, "service's CPU per order / ceiling's per request, saturated @%s\t%s\t\n", hi, times(m.cpu.SvcUS, ceilingCPU(rows, hi, "")))
	}
	fmt.Fprintf(t, "CPU per order / ceiling's per request, open %s one SKU\t%s\t≤ 2.0×\n", open, times(total("locked", open), ceilingCPU(rows, open, "")))
	many := fmt.Sprintf("locked, %d SKUs", o.skus)
	fmt.Fprintf(t, "CPU per order / ceiling's per request, open %s over %d SKUs\t%s\t\n", open, o.skus, times(total(many, open), ceilingCPU(rows, open, "")))
	fmt.Fprintf(t, "CPU per order / ceiling's, production (jwt, access log) open %s\t%s\t\n", open, times(total(caseProduction, open), ceilingCPU(rows, open, "")))
	if l, c := meanOf(rows, "locked", open, ""), meanOf(rows, caseCeiling, open, ""); l != nil && c != nil {
		fmt.Fprintf(t, "p99 open %s one SKU − ceiling's p99\t%+.1f ms\t≤ +10 ms\n", open, l.p99-c.p99)
	}
	fmt.Fprintf(t, "CPU per order, jwt / auth.shopper none @%s\t%s\t\n", hi, times(total("locked", hi), total(caseNoJWT, hi)))
	fmt.Fprintf(t, "CPU per order, access log on / off @%s (log level info)\t%s\t\n", hi, times(total(caseAccessOn, hi), total(caseAccessOff, hi)))
	if m := meanOf(rows, "locked", open, ""); m != nil && m.batches > 0 {
		fmt.Fprintf(t, "orders per batch, open %s one SKU\t%.1f\t\n", open, m.perBatch())
	}
	for _, load := range []string{hi, open} {
		if c := meanOf(rows, caseCeiling, load, ""); c != nil {
			fmt.Fprintf(t, "MariaDB CPU during the ceiling @%s (other work on the shared server)\t%.2f cores\t\n", load, c.dbCores)
		}
	}
}

// writeAB compares, for every case run on more than one side, each
// side's CPU per order and latency with the default side's, same run.
func writeAB(w io.Writer, rows []row) {
	type key struct{ name, load string }
	var order []key
	sides := map[key][]string{}
	for _, r := range rows {
		k := key{r.Case, r.Load}
		if _, ok := sides[k]; !ok {
			order = append(order, k)
		}
		seen := false
		for _, v := range sides[k] {
			seen = seen || v == r.Variant
		}
		if !seen {
			sides[k] = append(sides[k], r.Variant)
		}
	}
	header := false
	for _, k := range order {
		if len(sides[k]) < 2 {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "A/B in this run (µs of CPU per answered request; the first side is the worktree's default):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| case | load | side | service | MariaDB | Redis | broker | total | total / default | × its ceiling | p50 ms | p99 ms | orders/batch | req/s |")
			fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
			header = true
		}
		base := meanOf(rows, k.name, k.load, "")
		for _, v := range sides[k] {
			m := meanOf(rows, k.name, k.load, v)
			rel := "n/a"
			if base != nil && base.cpu.Total() > 0 {
				rel = fmt.Sprintf("%.2f×", m.cpu.Total()/base.cpu.Total())
			}
			side := v
			if side == "" {
				side = "default"
			}
			ofCeiling := "n/a"
			if c := ceilingCPU(rows, k.load, v); c > 0 && k.name != caseCeiling {
				ofCeiling = fmt.Sprintf("%.2f×", m.cpu.Total()/c)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %s | %.1f | %.1f | %.1f | %.0f |\n",
				k.name, k.load, side, m.cpu.SvcUS, m.cpu.DBUS, m.cpu.RedisUS, m.cpu.BrokerUS, m.cpu.Total(), rel, ofCeiling, m.p50, m.p99, m.perBatch(), m.reqPerSec)
		}
	}
}
