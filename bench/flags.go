package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

type options struct {
	vus, lowVUs int
	duration    time.Duration
	strategies  []string // "locked" (the service) and the designs of bench/compare
	skus        int
	dsn         string
	out         string
	k6          string
	accessLog   bool // also run locked at log level info with the access log off and on
	rate        int  // open arrival rate of the open-load rows (orders/s); 0: none
	openVUs     int  // most buyers at once of an open-load row
	held        int  // connections of the held-connections rows (held.go); 0: none
	rows        *regexp.Regexp
	abRefs      []string  // git refs whose services run every selected row too
	abEnv       []variant // configurations that run every selected row too
	profile     bool      // fetch the service's CPU and allocation profiles of every order row
	zookeeper   bool      // also run locked on the ZooKeeper lock backend
	replica     bool      // also run locked on a MariaDB primary with a local replica, min_replicas 0 and 1
	zkAddrs     []string
	// traceRatio, when above 0, adds a side tracing at that sampling
	// ratio into an OTLP sink of this process (otlpsink.go).
	traceRatio float64
	events     bool // also run every selected case with events.enabled, relayed to a private nats-server
	// repeat runs every selected case this many times, the sides in
	// reverse order every other time; the tables average the runs.
	repeat int
}

// variant is one side of an A/B comparison: a service binary and the
// environment added to the row's.
type variant struct {
	label string // "" for the worktree's build with the row's own environment
	bin   string
	// compare is the designs' server (bench/cmd/compare), the same
	// for every side: "" on an -ab-ref side, which runs no design row.
	compare string
	env     []string
	// runtime: the variant sets the Go runtime's GOGC, GOMEMLIMIT,
	// GODEBUG or GOMAXPROCS, which change the ceiling's server too: the
	// ceiling runs on that side as well, and the side's rows are measured
	// against its own ceiling.
	runtime bool
}

// parseFlags reads the command line.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.vus, "vus", 1000, "concurrent buyers of the main runs")
	fs.IntVar(&o.lowVUs, "low-vus", 50, "concurrent buyers of the flat-cost runs")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each k6 run")
	strategies := fs.String("strategies", "locked,per-request,conditional,optimistic,pessimistic", "locked (the service) and the comparison designs of bench/compare to run")
	fs.IntVar(&o.skus, "skus", 100, "SKUs of the many-SKU run")
	fs.StringVar(&o.dsn, "mysql", "root@tcp(127.0.0.1:3306)/", "MySQL server DSN, without a database")
	fs.StringVar(&o.out, "out", "", "results directory (default loadtest/results/bench-<time>)")
	fs.StringVar(&o.k6, "k6", "", "k6 binary (default: PATH, then GOPATH/bin, else go install)")
	fs.BoolVar(&o.accessLog, "access-log", true, "also run locked at log level info with log.access off and on (the default), to measure the access log's cost")
	fs.BoolVar(&o.zookeeper, "zookeeper", true, "also run locked on the ZooKeeper lock backend (a private standalone server), as a ratio to Redis")
	fs.BoolVar(&o.replica, "mysql-replica", true, "also run locked on a throwaway MariaDB primary with a local replica, mysql.min_replicas 0 and 1 interleaved: what waiting for the replica costs")
	fs.IntVar(&o.rate, "rate", 2000, "arrivals per second of the open-load rows (0: no open-load rows)")
	fs.IntVar(&o.openVUs, "open-vus", 1000, "most buyers at once of an open-load row")
	fs.IntVar(&o.held, "held", 10000, "connections of the held-connections rows (a Go client, each connection a closed-loop buyer; 0: no such rows)")
	rows := fs.String("rows", "", "run only the cases whose \"name @load\" matches this regexp (the ceilings always run: every ratio needs them)")
	abRefs := fs.String("ab-ref", "", "also run every selected case with the service built from each of these comma-separated git refs, next to the worktree's (A/B in one run)")
	fs.BoolVar(&o.profile, "profile", false, "write the service's CPU and allocation profiles of every row (pprof), and its memory statistics halfway through it, into the results directory")
	abEnv := fs.String("ab-env", "", "also run every selected case with these settings (SECKILL_*, OTEL_* or the Go runtime's GOGC, GOMEMLIMIT, GODEBUG, GOMAXPROCS): 'label:KEY=V,KEY=V;label2:KEY=V'")
	fs.IntVar(&o.repeat, "repeat", 1, "run the selected cases this many times (1..20), each case's sides in reverse order every other time, so no side always runs first; the tables average the runs")
	fs.BoolVar(&o.events, "events", false, "also run every selected case with order events on (events.enabled), relayed to a private nats-server: what the outbox and its relay cost")
	fs.Float64Var(&o.traceRatio, "trace-ratio", 0, "also run every selected case with tracing on at this sampling ratio (OTEL_TRACES_SAMPLER parentbased_traceidratio), the spans posted over OTLP/HTTP to a sink in this process that reads and discards them; 0: no traced side")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.strategies = strings.Split(*strategies, ",")
	for _, ref := range strings.Split(*abRefs, ",") {
		if ref = strings.TrimSpace(ref); ref != "" {
			o.abRefs = append(o.abRefs, ref)
		}
	}
	if *rows != "" {
		re, err := regexp.Compile(*rows)
		if err != nil {
			return o, fmt.Errorf("-rows: %w", err)
		}
		o.rows = re
	}
	vs, err := parseVariants(*abEnv)
	if err != nil {
		return o, err
	}
	o.abEnv = vs
	if o.traceRatio < 0 || o.traceRatio > 1 {
		return o, fmt.Errorf("-trace-ratio %g: want a ratio from 0 to 1", o.traceRatio)
	}
	if o.repeat < 1 || o.repeat > 20 {
		return o, fmt.Errorf("-repeat %d: want 1 to 20", o.repeat)
	}
	return o, nil
}

// runtimeEnv is the Go runtime's settings a variant may also change.
var runtimeEnv = map[string]bool{"GOGC": true, "GOMEMLIMIT": true, "GODEBUG": true, "GOMAXPROCS": true}

// parseVariants reads -ab-env: variants separated by ';', each a label,
// ':', and comma-separated KEY=VALUE settings.
func parseVariants(s string) ([]variant, error) {
	var vs []variant
	for _, part := range strings.Split(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		label, settings, ok := strings.Cut(part, ":")
		label = strings.TrimSpace(label)
		if !ok || label == "" {
			return nil, fmt.Errorf("-ab-env %q: want label:KEY=VALUE[,KEY=VALUE]", part)
		}
		v := variant{label: label}
		for _, kv := range strings.Split(settings, ",") {
			kv = strings.TrimSpace(kv)
			k, _, ok := strings.Cut(kv, "=")
			if !ok || !(strings.HasPrefix(k, "SECKILL_") || strings.HasPrefix(k, "OTEL_") || runtimeEnv[k]) {
				return nil, fmt.Errorf("-ab-env %q: %q is neither SECKILL_KEY=VALUE, OTEL_KEY=VALUE nor one of the Go runtime's GOGC, GOMEMLIMIT, GODEBUG, GOMAXPROCS", part, kv)
			}
			v.env = append(v.env, kv)
			v.runtime = v.runtime || runtimeEnv[k]
		}
		vs = append(vs, v)
	}
	return vs, nil
}
