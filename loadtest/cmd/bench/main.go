// Command bench runs the same k6 scenario (loadtest/bench.js) against the
// service (the "locked" rows) and each comparison design in turn (served
// by loadtest/cmd/compare on the same schema and database), on this
// machine, in one run, next to the HTTP ceiling measured on the same box,
// and prints one table with the ratios between them. Every run also
// verifies from the database that nothing was oversold. Figures are only
// comparable within one run: read the ratios.
//
//	go run ./loadtest/cmd/bench                 (make bench)
//	go run ./loadtest/cmd/bench -duration 20s -vus 1000 -low-vus 50
//	go run ./loadtest/cmd/bench -duration 5s -rows 'locked$' -ab-env 'no linger:SECKILL_ORDER_LINGER=0'
//
// Every row also reports the CPU time per answered request of the service,
// of MariaDB and of the benchmark's Redis, from their /proc counters, and
// divides it by the ceiling's: the steadier yardstick on a shared box.
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/loadtest/harness"
	"github.com/seckill/seckill/loadtest/verify"
)

const token = "bench-admin-token-0123456789"

// The shopper secret and order id key of the benchmarked services: loopback only.
const (
	shopperSecret = "bench-shopper-secret-0123456789abcdef"
	orderIDKey    = "62656e63682d6f726465722d69642d6b"
)

type options struct {
	vus, lowVUs int
	duration    time.Duration
	strategies  []string // "locked" (the service) and the designs of loadtest/compare
	skus        int
	dsn         string
	out         string
	k6          string
	accessLog   bool // also run locked at log level info with the access log off and on
	rate        int  // open arrival rate of the open-load rows (orders/s); 0: none
	openVUs     int  // most buyers at once of an open-load row
	rows        *regexp.Regexp
	abRefs      []string  // git refs whose services run every selected row too
	abEnv       []variant // configurations that run every selected row too
	profile     bool      // fetch the service's CPU and allocation profiles of every order row
	zookeeper   bool      // also run locked on the ZooKeeper lock backend
	replica     bool      // also run locked on a MariaDB primary with a local replica, min_replicas 0 and 1
	zkAddrs     []string
}

// variant is one side of an A/B comparison: a service binary and the
// environment added to the row's.
type variant struct {
	label string // "" for the worktree's build with the row's own environment
	bin   string
	// compare is the designs' server (loadtest/cmd/compare), the same
	// for every side: "" on an -ab-ref side, which runs no design row.
	compare string
	env     []string
	// runtime: the variant sets the Go runtime's GOGC, GOMEMLIMIT,
	// GODEBUG or GOMAXPROCS, which change the ceiling's server too: the
	// ceiling runs on that side as well, and the side's rows are measured
	// against its own ceiling.
	runtime bool
}

// benchCase is one k6 run against one freshly started instance.
type benchCase struct {
	name     string
	strategy string // "" for the ceiling, "locked" for the service, else a design of loadtest/compare
	vus      int
	skus     int
	soldOut  bool // the SKU is sold out before the run: every answer is a reject
	ceiling  bool
	// access, when set ("on" or "off"), runs at the default log level
	// (info) with log.access so: what the access log costs.
	access string
	// rate > 0 is an open load: this many arrivals per second, whatever
	// the latency, from up to vus buyers at once.
	rate int
	// noJWT serves with auth.shopper none: what verifying a shopper costs.
	noJWT bool
	// topology, when set, runs on a private Sentinel group or Cluster
	// (harness.RedisSentinel, harness.RedisCluster) instead of the
	// standalone server, with lock.min_replicas minReplicas.
	topology    string
	minReplicas int
	zk          bool // on the ZooKeeper lock backend
	// replicated runs on a throwaway MariaDB primary with a local replica
	// (replica.go), with mysql.min_replicas mysqlMinReplicas.
	replicated       bool
	mysqlMinReplicas int
}

// load names the case's load: closed-loop buyers or an open arrival rate.
func (c benchCase) load() string {
	if c.rate > 0 {
		return fmt.Sprintf("%d/s", c.rate)
	}
	return fmt.Sprintf("%d VUs", c.vus)
}

// design reports whether the case runs a comparison design's server
// rather than the service.
func (c benchCase) design() bool { return c.strategy != "" && c.strategy != "locked" }

// label is how -rows selects a case: its name and its load.
func (c benchCase) label() string { return c.name + " @" + c.load() }

// Cases of the access-log pair; on is the default configuration.
const (
	caseAccessOff = "locked, info, access log off"
	caseAccessOn  = "locked, info, access log on"
	caseNoJWT     = "locked, auth.shopper none"
	caseCeiling   = "ceiling (constant answer)"
	// caseProduction is locked as production runs it: shopper tokens
	// verified, log level info, the access log on.
	caseProduction = "locked, production (jwt, info, access log)"
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
	Verified      string  `json:"verified"`
	CPU           cpuCost `json:"cpu"`
	LoadAvg       string  `json:"loadavg_before"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.vus, "vus", 1000, "concurrent buyers of the main runs")
	fs.IntVar(&o.lowVUs, "low-vus", 50, "concurrent buyers of the flat-cost runs")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each k6 run")
	strategies := fs.String("strategies", "locked,per-request,conditional,optimistic,pessimistic", "locked (the service) and the comparison designs of loadtest/compare to run")
	fs.IntVar(&o.skus, "skus", 100, "SKUs of the many-SKU run")
	fs.StringVar(&o.dsn, "mysql", "root@tcp(127.0.0.1:3306)/", "MySQL server DSN, without a database")
	fs.StringVar(&o.out, "out", "", "results directory (default loadtest/results/bench-<time>)")
	fs.StringVar(&o.k6, "k6", "", "k6 binary (default: PATH, then GOPATH/bin, else go install)")
	fs.BoolVar(&o.accessLog, "access-log", true, "also run locked at log level info with log.access off and on (the default), to measure the access log's cost")
	fs.BoolVar(&o.zookeeper, "zookeeper", true, "also run locked on the ZooKeeper lock backend (a private standalone server), as a ratio to Redis")
	fs.BoolVar(&o.replica, "mysql-replica", true, "also run locked on a throwaway MariaDB primary with a local replica, mysql.min_replicas 0 and 1 interleaved: what waiting for the replica costs")
	fs.IntVar(&o.rate, "rate", 2000, "arrivals per second of the open-load rows (0: no open-load rows)")
	fs.IntVar(&o.openVUs, "open-vus", 1000, "most buyers at once of an open-load row")
	rows := fs.String("rows", "", "run only the cases whose \"name @load\" matches this regexp (the ceilings always run: every ratio needs them)")
	abRefs := fs.String("ab-ref", "", "also run every selected case with the service built from each of these comma-separated git refs, next to the worktree's (A/B in one run)")
	fs.BoolVar(&o.profile, "profile", false, "write the service's CPU and allocation profiles of every order row (pprof) into the results directory")
	abEnv := fs.String("ab-env", "", "also run every selected case with these settings (SECKILL_* or the Go runtime's GOGC, GOMEMLIMIT, GODEBUG, GOMAXPROCS): 'label:KEY=V,KEY=V;label2:KEY=V'")
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
			if !ok || !(strings.HasPrefix(k, "SECKILL_") || runtimeEnv[k]) {
				return nil, fmt.Errorf("-ab-env %q: %q is neither SECKILL_KEY=VALUE nor one of the Go runtime's GOGC, GOMEMLIMIT, GODEBUG, GOMAXPROCS", part, kv)
			}
			v.env = append(v.env, kv)
			v.runtime = v.runtime || runtimeEnv[k]
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// plan lists the cases of a run, in order. The ceilings come first and
// again after the saturated runs: the ratios use the mean of its runs,
// so a machine that drifts during the run moves both sides.
func plan(o options) []benchCase {
	cases := []benchCase{{name: caseCeiling, vus: o.vus, ceiling: true}}
	for _, s := range o.strategies {
		cases = append(cases, benchCase{name: s, strategy: s, vus: o.vus, skus: 1})
		if s == "locked" && o.zookeeper {
			cases = append(cases, benchCase{name: caseZooKeeper, strategy: s, vus: o.vus, skus: 1, zk: true})
		}
	}
	cases = append(cases,
		benchCase{name: "locked, sold out", strategy: "locked", vus: o.vus, skus: 1, soldOut: true},
		benchCase{name: fmt.Sprintf("locked, %d SKUs", o.skus), strategy: "locked", vus: o.vus, skus: o.skus},
		benchCase{name: caseNoJWT, strategy: "locked", vus: o.vus, skus: 1, noJWT: true},
	)
	if o.accessLog { // side by side, so the machine's drift moves both
		cases = append(cases,
			benchCase{name: caseAccessOff, strategy: "locked", vus: o.vus, skus: 1, access: "off"},
			benchCase{name: caseAccessOn, strategy: "locked", vus: o.vus, skus: 1, access: "on"},
		)
	}
	cases = append(cases, benchCase{name: caseCeiling, vus: o.vus, ceiling: true})
	if o.rate > 0 {
		open := func(c benchCase) benchCase { c.rate, c.vus = o.rate, o.openVUs; return c }
		cases = append(cases,
			open(benchCase{name: caseCeiling, ceiling: true}),
			open(benchCase{name: "locked", strategy: "locked", skus: 1}),
			open(benchCase{name: fmt.Sprintf("locked, %d SKUs", o.skus), strategy: "locked", skus: o.skus}),
			open(benchCase{name: caseProduction, strategy: "locked", skus: 1, access: "on"}),
			open(benchCase{name: caseCeiling, ceiling: true}),
		)
	}
	cases = append(cases, topologyCases(o.vus)...)
	if o.replica {
		cases = append(cases, replicatedCases(o.vus)...)
	}
	cases = append(cases,
		benchCase{name: caseCeiling, vus: o.lowVUs, ceiling: true},
		benchCase{name: "locked", strategy: "locked", vus: o.lowVUs, skus: 1},
		benchCase{name: "per-request", strategy: "per-request", vus: o.lowVUs, skus: 1},
		benchCase{name: "conditional", strategy: "conditional", vus: o.lowVUs, skus: 1},
	)
	if o.rows == nil {
		return cases
	}
	loads := map[string]bool{} // a ceiling runs when a picked case has its load
	for _, c := range cases {
		if !c.ceiling && o.rows.MatchString(c.label()) {
			loads[c.load()] = true
		}
	}
	var picked []benchCase
	for _, c := range cases {
		if o.rows.MatchString(c.label()) || (c.ceiling && loads[c.load()]) {
			picked = append(picked, c)
		}
	}
	return picked
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	root, err := harness.ModuleRoot(".")
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "loadtest", "results", "bench-"+time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	k6, err := harness.EnsureK6(ctx, o.k6, os.Stderr)
	if err != nil {
		return err
	}
	bin, err := harness.BuildService(ctx, root, o.out)
	if err != nil {
		return err
	}
	compareBin, err := buildCompare(ctx, root, o.out)
	if err != nil {
		return err
	}
	variants := []variant{{bin: bin, compare: compareBin}}
	for _, ref := range o.abRefs {
		refBin, err := buildRef(ctx, root, ref, o.out)
		if err != nil {
			return err
		}
		variants = append(variants, variant{label: ref, bin: refBin})
	}
	for _, v := range o.abEnv {
		v.bin, v.compare = bin, compareBin
		variants = append(variants, v)
	}
	rs, err := startRedis(ctx, o.out)
	if err != nil {
		return err
	}
	defer rs.stop()
	mdb, err := sql.Open("mysql", o.dsn)
	if err != nil {
		return err
	}
	defer mdb.Close()
	dbPID, err := mariadbPID(ctx, mdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: MariaDB's CPU is not measured:", err)
	}

	cases := plan(o)
	tp := newTopologies(o.out)
	defer tp.stop()
	rp := &replicated{dir: filepath.Join(o.out, "mysql-replicated")}
	defer rp.stop()
	if needsZooKeeper(cases) {
		z, err := startZooKeeper(ctx, &o)
		if err != nil {
			return err
		}
		defer z.Stop()
	}
	fmt.Fprintf(stdout, "bench: %d cases × %d variants of %s on %d CPUs (load average %s); results in %s\n",
		len(cases), len(variants), o.duration, runtime.NumCPU(), loadAverage(), o.out)
	var rows []row
	failed := false
	i := 0
	for _, c := range cases {
		for _, v := range variants {
			if c.ceiling && v.label != "" && !v.runtime { // the ceiling is the same for every other variant
				continue
			}
			if c.design() && v.compare == "" { // a design's code is not the ref's
				continue
			}
			r, err := runCase(ctx, o, c, v, i, root, k6, rs, tp, rp, dbPID)
			i++
			if err != nil {
				return fmt.Errorf("%s: %w", c.label(), err)
			}
			fmt.Fprintf(stdout, "  %-44s %-9s %-10s %8.0f orders/s %8.0f rejects/s %5d 503s  p50 %5.1f p99 %6.1f ms  cpu %5.0f µs/req (k6 %2.0f%%, other %.1f cores)  %s\n",
				r.Case, r.Load, r.Variant, r.OrdersPerSec, r.RejectsPerSec, r.Unavailable, r.P50, r.P99, r.CPU.Total(), 100*r.CPU.K6Share, r.CPU.OtherCores, r.Verified)
			failed = failed || strings.HasPrefix(r.Verified, "VIOLATED") || r.Unexpected > 0
			rows = append(rows, r)
		}
	}
	var table bytes.Buffer
	writeTable(&table, rows, o)
	fmt.Fprint(stdout, "\n", table.String())
	raw, _ := json.MarshalIndent(rows, "", "  ")
	if err := os.WriteFile(filepath.Join(o.out, "bench.json"), raw, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "bench.md"), table.Bytes(), 0o644); err != nil {
		return err
	}
	if failed {
		return errors.New("a run was oversold or answered outside the contract (see the verified and other-status columns)")
	}
	return nil
}

func runCase(ctx context.Context, o options, c benchCase, v variant, i int, root, k6 string, rs *redisServer, tp *topologies, rp *replicated, dbPID int) (row, error) {
	r := row{Case: c.name, Variant: v.label, Load: c.load(), VUs: c.vus, Rate: c.rate, Verified: "n/a", LoadAvg: loadAverage()}
	bin := v.bin
	serverDSN, replicaEnv, err := rp.server(ctx, c, o.dsn)
	if err != nil {
		return r, err
	}
	mc, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return r, err
	}
	dbName := fmt.Sprintf("seckill_bench_%d_%d", time.Now().Unix(), i)
	admin, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return r, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
		return r, fmt.Errorf("create database: %w", err)
	}
	defer admin.ExecContext(context.Background(), "DROP DATABASE "+dbName)
	mc.DBName = dbName
	dsn := mc.FormatDSN()

	port, err := harness.FreePort()
	if err != nil {
		return r, err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	env := append(os.Environ(),
		"SECKILL_MYSQL_DSN="+dsn,
		"SECKILL_REDIS_ADDRS="+rs.addr,
		"SECKILL_ADMIN_TOKEN="+token,
		"SECKILL_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"SECKILL_LOG_LEVEL=error",
		"SECKILL_LOCK_PREFIX="+fmt.Sprintf("bench%d:", i),
		"SECKILL_BENCH_ENDPOINTS=true",
		// Buyers are verified (auth.shopper jwt, the default); k6 signs
		// their HS256 tokens with the same secret.
		"SECKILL_AUTH_JWT_SECRET="+shopperSecret,
		"SECKILL_AUTH_ORDER_ID_KEY="+orderIDKey,
	)
	if c.access != "" { // later entries win: the default level, the access log as the case says
		env = append(env, "SECKILL_LOG_LEVEL=info", "SECKILL_LOG_ACCESS="+strconv.FormatBool(c.access == "on"))
	}
	if c.noJWT {
		env = append(env, "SECKILL_AUTH_SHOPPER=none")
	}
	topoEnv, err := tp.env(ctx, c) // later entries win: the topology's Redis
	if err != nil {
		return r, err
	}
	env = append(env, topoEnv...)
	if c.zk {
		env = append(env, zkEnv(o, i)...)
	}
	env = append(env, replicaEnv...)
	env = append(env, v.env...)
	var debugBase string
	if o.profile && !c.ceiling {
		dport, err := harness.FreePort()
		if err != nil {
			return r, err
		}
		debugBase = "http://127.0.0.1:" + strconv.Itoa(dport)
		env = append(env, "SECKILL_DEBUG_ADDR=127.0.0.1:"+strconv.Itoa(dport))
	}
	mig := exec.CommandContext(ctx, bin, "migrate", "up")
	mig.Env = env
	if out, err := mig.CombinedOutput(); err != nil {
		return r, fmt.Errorf("migrate: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(o.out, fmt.Sprintf("service-%02d.log", i)))
	if err != nil {
		return r, err
	}
	defer logf.Close()
	svc := exec.Command(bin, "serve")
	if c.design() {
		svc = exec.Command(v.compare, "-design", c.strategy)
	}
	svc.Env, svc.Stdout, svc.Stderr = env, logf, logf
	if err := svc.Start(); err != nil {
		return r, err
	}
	defer func() {
		_ = svc.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = svc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = svc.Process.Kill()
			<-done
		}
	}()
	if err := waitReady(ctx, base); err != nil {
		return r, err
	}

	const bigStock = 50_000_000
	var skuIDs []string
	var ids []int64
	for range max(c.skus, 1) {
		stock := int64(bigStock)
		if c.soldOut {
			stock = 1
		}
		id, err := createSKU(ctx, base, stock)
		if err != nil {
			return r, err
		}
		ids = append(ids, id)
		skuIDs = append(skuIDs, strconv.FormatInt(id, 10))
	}
	if c.soldOut { // sell the one unit: from here on every answer is sold_out
		if err := buyOnce(ctx, base, ids[0]); err != nil {
			return r, err
		}
	}

	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return r, err
	}
	defer db.Close()
	q0, err := questions(ctx, admin)
	if err != nil {
		return r, err
	}
	c0, err := rs.commands(ctx)
	if err != nil {
		return r, err
	}
	v0, err := versions(ctx, db)
	if err != nil {
		return r, err
	}

	summary := filepath.Join(o.out, fmt.Sprintf("k6-%02d.json", i))
	path := "/api/v1/orders"
	if c.ceiling {
		path = "/bench/constant"
	}
	k := exec.CommandContext(ctx, k6, "run", "--quiet", "--no-color", "--no-usage-report",
		"-e", "URL="+base, "-e", "TARGET_PATH="+path, "-e", "SKU_IDS="+strings.Join(skuIDs, ","),
		"-e", "VUS="+strconv.Itoa(c.vus), "-e", "RATE="+strconv.Itoa(c.rate), "-e", "DURATION="+o.duration.String(),
		"-e", "SUMMARY="+summary, "-e", fmt.Sprintf("RUN_ID=b%d", i),
		filepath.Join(root, "loadtest", "bench.js"))
	k.Env = append(os.Environ(), "SHOPPER_SECRET="+shopperSecret) // not on the command line
	var k6out bytes.Buffer
	k.Stdout, k.Stderr = &k6out, &k6out
	var prof profiler
	if debugBase != "" {
		prof.start(ctx, debugBase, o.out, fmt.Sprintf("%02d", i), o.duration)
	}
	cpu0 := sampleCPU(svc.Process.Pid, dbPID, rs.cmd.Process.Pid)
	started := time.Now()
	err = k.Run()
	wall := time.Since(started)
	cpu1 := sampleCPU(svc.Process.Pid, dbPID, rs.cmd.Process.Pid)
	var k6CPU time.Duration
	if k.ProcessState != nil {
		k6CPU = k.ProcessState.UserTime() + k.ProcessState.SystemTime()
	}
	for _, perr := range prof.wait() {
		fmt.Fprintln(os.Stderr, "bench:", perr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, k6out.String())
		var exit *exec.ExitError
		if !errors.As(err, &exit) { // a failed threshold still wrote its summary
			return r, fmt.Errorf("k6: %w", err)
		}
	}

	q1, err := questions(ctx, admin)
	if err != nil {
		return r, err
	}
	c1, err := rs.commands(ctx)
	if err != nil {
		return r, err
	}
	v1, err := versions(ctx, db)
	if err != nil {
		return r, err
	}
	r.RSSMB = peakRSS(svc.Process.Pid)
	if !c.ceiling && !c.design() { // the service's own histograms (commit, lock, HTTP), for the tails
		if err := fetchTo(ctx, base+"/metrics", filepath.Join(o.out, fmt.Sprintf("metrics-%02d.txt", i)), 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "bench: metrics:", err)
		}
	}
	if err := readSummary(summary, &r); err != nil {
		return r, err
	}
	r.CPU = costOf(cpu0, cpu1, k6CPU, wall, r.Requests)
	// Statements: the run's, less this program's own two in between
	// (the version sum and the second status read, which counts itself).
	stmts := max(float64(q1-q0)-2, 0)
	switch {
	case r.Orders > 0:
		r.SQLPerOrder = stmts / float64(r.Orders)
	case r.Rejects > 0:
		r.SQLPerReject = stmts / float64(r.Rejects)
	}
	if r.Requests > 0 && c.topology == "" { // the counter is the standalone server's
		r.RedisPerReq = float64(c1-c0-1) / float64(r.Requests)
	}
	r.Batches = v1 - v0

	if !c.ceiling {
		r.Verified = "ok"
		for _, id := range ids {
			want := verify.Expect{InitialStock: bigStock}
			if c.soldOut {
				want = verify.Expect{InitialStock: 1, SoldOut: true}
			}
			rep, err := verify.CheckDB(ctx, db, id, want)
			if err != nil {
				return r, err
			}
			if !rep.OK() {
				r.Verified = "VIOLATED: " + strings.Join(rep.Names(), ",")
			}
		}
		var orders int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&orders); err != nil {
			return r, err
		}
		want := r.Orders
		if c.soldOut {
			want++
		}
		if orders != want {
			r.Verified = fmt.Sprintf("VIOLATED: %d orders in the database, %d answered 201", orders, want)
		}
	}
	return r, nil
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

func writeTable(w io.Writer, rows []row, o options) {
	// find returns the run of a case, or the mean of its runs.
	find := func(name string, vus int) *row {
		var mean row
		n := 0
		for _, r := range rows {
			if r.Case == name && r.VUs == vus && r.Rate == 0 && r.Variant == "" {
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
	ratio := func(a, b *row, f func(*row) float64) string {
		if a == nil || b == nil || f(b) == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", f(a)/f(b))
	}
	orders := func(r *row) float64 { return r.OrdersPerSec }
	reqs := func(r *row) float64 { return r.ReqPerSec }
	p99 := func(r *row) float64 { return r.P99 }

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
	hi, lo := o.vus, o.lowVUs
	ceil := find(caseCeiling, hi)
	locked := find("locked", hi)
	sold := find("locked, sold out", hi)
	many := find(fmt.Sprintf("locked, %d SKUs", o.skus), hi)
	fmt.Fprintln(w)
	var t tabwriter.Writer
	t.Init(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(&t, "ratio (same run; the ceiling is the mean of its runs)\tmeasured\tgoal")
	fmt.Fprintf(&t, "locked / per-request, orders/s @%d\t%s\t≥ 30×\n", hi, ratio(locked, find("per-request", hi), orders))
	fmt.Fprintf(&t, "locked / conditional, orders/s @%d\t%s\t≥ 5×\n", hi, ratio(locked, find("conditional", hi), orders))
	fmt.Fprintf(&t, "locked / optimistic, orders/s @%d\t%s\t\n", hi, ratio(locked, find("optimistic", hi), orders))
	fmt.Fprintf(&t, "locked / pessimistic, orders/s @%d\t%s\t\n", hi, ratio(locked, find("pessimistic", hi), orders))
	if locked != nil && ceil != nil && ceil.ReqPerSec > 0 {
		fmt.Fprintf(&t, "locked orders/s / ceiling req/s @%d\t%.2f×\t≥ 0.8×\n", hi, locked.OrdersPerSec/ceil.ReqPerSec)
	}
	if sold != nil && ceil != nil && ceil.ReqPerSec > 0 {
		fmt.Fprintf(&t, "sold-out rejects/s / ceiling req/s @%d\t%.2f×\t≥ 0.9×\n", hi, sold.RejectsPerSec/ceil.ReqPerSec)
	}
	fmt.Fprintf(&t, "locked p99 / ceiling p99 @%d\t%s\t≤ 2×\n", hi, ratio(locked, ceil, p99))
	fmt.Fprintf(&t, "sold-out p99 / ceiling p99 @%d\t%s\t≤ 2×\n", hi, ratio(sold, ceil, p99))
	fmt.Fprintf(&t, "locked orders/s @%d / @%d (flat cost)\t%s\t≥ 0.9×\n", hi, lo, ratio(locked, find("locked", lo), orders))
	fmt.Fprintf(&t, "per-request orders/s @%d / @%d\t%s\t(collapse)\n", hi, lo, ratio(find("per-request", hi), find("per-request", lo), orders))
	fmt.Fprintf(&t, "conditional orders/s @%d / @%d\t%s\t(collapse)\n", hi, lo, ratio(find("conditional", hi), find("conditional", lo), orders))
	fmt.Fprintf(&t, "ceiling req/s @%d / @%d\t%s\t\n", hi, lo, ratio(ceil, find(caseCeiling, lo), reqs))
	fmt.Fprintf(&t, "%d SKUs / 1 SKU, orders/s @%d\t%s\t≥ 1×\n", o.skus, hi, ratio(many, locked, orders))
	if on, off := find(caseAccessOn, hi), find(caseAccessOff, hi); on != nil && off != nil {
		fmt.Fprintf(&t, "access log on / off, orders/s @%d (log level info)\t%s\t\n", hi, ratio(on, off, orders))
		fmt.Fprintf(&t, "access log on / off, p99 @%d (log level info)\t%s\t\n", hi, ratio(on, off, p99))
	}
	writeTopologyRatios(&t, find, ratio, hi)
	writeReplicationRatio(&t, find, ratio, hi)
	writeZooKeeperRatios(&t, find(caseZooKeeper, hi), locked, ratio, hi)
	if sold != nil {
		fmt.Fprintf(&t, "SQL statements per sold-out reject\t%s\t0\n", stat(sold.SQLPerReject))
	}
	if locked != nil && locked.Orders > 0 {
		fmt.Fprintf(&t, "orders per batch (one transaction) @%d\t%.1f\t\n", hi, float64(locked.Orders)/float64(max(locked.Batches, 1)))
	}
	writeCPURatios(&t, rows, o)
	t.Flush()
	writeAB(w, rows)
}

func stat(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.3f", v)
}

// questions is the server's statement counter (all sessions).
func questions(ctx context.Context, db *sql.DB) (int64, error) {
	var name string
	var v int64
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &v)
	return v, err
}

// versions sums the SKUs' versions: one per committed batch (or restock).
func versions(ctx context.Context, db *sql.DB) (int64, error) {
	var v sql.NullInt64
	err := db.QueryRowContext(ctx, "SELECT SUM(version) FROM skus").Scan(&v)
	return v.Int64, err
}

func peakRSS(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func createSKU(ctx context.Context, base string, stock int64) (int64, error) {
	body := fmt.Sprintf(`{"name":"bench","stock":%d,"per_user_limit":1}`, stock)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/admin/v1/skus", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct{ ID int64 }
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("create sku: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	return out.ID, nil
}

func buyOnce(ctx context.Context, base string, sku int64) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/orders",
		strings.NewReader(fmt.Sprintf(`{"sku_id":%d,"user_id":"first","quantity":1}`, sku)))
	tok, err := auth.Mint([]byte(shopperSecret), auth.Claims{Subject: "first", Audience: "seckill", TTL: time.Hour}, time.Now())
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("buying the last unit: %s", resp.Status)
	}
	return nil
}

// buildCompare compiles the designs' server, loadtest/cmd/compare, into dir.
func buildCompare(ctx context.Context, root, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "compare")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./loadtest/cmd/compare")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the designs' server: %w\n%s", err, out)
	}
	return bin, nil
}

func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("service at %s not ready within 30s", base)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type redisServer struct {
	addr string
	cmd  *exec.Cmd
	rdb  *redis.Client
}

// startRedis starts a private redis-server, so that its command counter
// counts this benchmark's commands only.
func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	s := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port)}
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	s.rdb = redis.NewClient(&redis.Options{Addr: s.addr})
	deadline := time.Now().Add(10 * time.Second)
	for s.rdb.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s, nil
}

// commands is Redis's total_commands_processed (the INFO itself included).
func (s *redisServer) commands(ctx context.Context) (int64, error) {
	info, err := s.rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("redis INFO has no total_commands_processed")
}

func (s *redisServer) stop() {
	s.rdb.Close()
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
