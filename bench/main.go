// Command bench runs the same k6 scenario (bench/bench.js) against the
// service (the "locked" rows) and each comparison design in turn (served
// by bench/cmd/compare on the same schema and database), on this
// machine, in one run, next to the HTTP ceiling measured on the same box,
// and prints one table with the ratios between them. Every run also
// verifies from the database that nothing was oversold. Figures are only
// comparable within one run: read the ratios.
//
//	go run ./bench                 (make bench)
//	go run ./bench -duration 20s -vus 1000 -low-vus 50
//	go run ./bench -duration 5s -rows 'locked$' -ab-env 'no linger:SECKILL_ORDER_LINGER=0'
//	go run ./bench -duration 8s -rows '^locked @1000 VUs$' -trace-ratio 0.01   (tracing's cost)
//
// Every row also reports the CPU time per answered request of the service,
// of MariaDB and of the benchmark's Redis, from their /proc counters, and
// divides it by the ceiling's: the steadier yardstick on a shared box.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/internal/testenv/natsserver"
	"github.com/seckill/seckill/internal/toolchain"
	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

const token = "bench-admin-token-0123456789"

// The shopper secret and order id key of the benchmarked services: loopback only.
const (
	shopperSecret = "bench-shopper-secret-0123456789abcdef"
	orderIDKey    = "62656e63682d6f726465722d69642d6b"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench is what every case of a run shares: the options, the k6 binary,
// the benchmark's Redis, MariaDB's process and the servers started for
// some cases (the Redis topologies, the replicated MariaDB, ZooKeeper).
type bench struct {
	o     options
	root  string // the module
	k6    string
	rs    *redisServer
	dbPID int // MariaDB's, for its CPU; 0 when unknown
	// brokerPID is -events' nats-server's, for its CPU; 0 without it.
	brokerPID int
	tp        *topologies
	rp        *replicated
	zk        *zktest.ZooKeeper
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	root, err := toolchain.ModuleRoot(".")
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "loadtest", "results", "bench-"+time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	k6, err := toolchain.EnsureK6(ctx, o.k6, os.Stderr)
	if err != nil {
		return err
	}
	variants, err := buildVariants(ctx, o, root)
	if err != nil {
		return err
	}
	if o.traceRatio > 0 {
		sink, err := startOTLPSink()
		if err != nil {
			return err
		}
		defer func() { sink.stop(); fmt.Fprintln(stdout, "bench:", sink) }()
		// The worktree's build; no design row (they do not trace).
		variants = append(variants, variant{label: fmt.Sprintf("traced %g", o.traceRatio), bin: variants[0].bin, env: sink.env(o.traceRatio)})
	}
	brokerPID := 0
	if o.events {
		ns, err := natsserver.Start(ctx, o.out)
		if err != nil {
			return fmt.Errorf("-events: %w", err)
		}
		defer ns.Kill()
		brokerPID = ns.Pid()
		// The worktree's build; no design row (they write no events).
		variants = append(variants, variant{label: "events on", bin: variants[0].bin, env: ns.Env()})
	}
	cases := plan(o)
	b, err := start(ctx, o, root, k6, cases)
	defer b.stop()
	if err != nil {
		return err
	}
	b.brokerPID = brokerPID
	fmt.Fprintf(stdout, "bench: %d cases × %d variants of %s on %d CPUs (load average %s); results in %s\n",
		len(cases), len(variants), o.duration, runtime.NumCPU(), loadAverage(), b.o.out)
	rows, failed, err := b.runAll(ctx, cases, variants, stdout)
	if err != nil {
		return err
	}
	if err := b.writeResults(rows, stdout); err != nil {
		return err
	}
	if failed {
		return errors.New("a run was oversold or answered outside the contract (see the verified and other-status columns)")
	}
	return nil
}

// buildVariants builds the worktree's service and the designs' server,
// and each -ab-ref's service: the sides every selected case runs on.
func buildVariants(ctx context.Context, o options, root string) ([]variant, error) {
	bin, err := toolchain.BuildService(ctx, root, o.out)
	if err != nil {
		return nil, err
	}
	compareBin := filepath.Join(o.out, "compare")
	if err := toolchain.Build(ctx, root, "./bench/cmd/compare", compareBin); err != nil {
		return nil, err
	}
	variants := []variant{{bin: bin, compare: compareBin}}
	for _, ref := range o.abRefs {
		refBin, err := buildRef(ctx, root, ref, o.out)
		if err != nil {
			return nil, err
		}
		variants = append(variants, variant{label: ref, bin: refBin})
	}
	for _, v := range o.abEnv {
		v.bin, v.compare = bin, compareBin
		variants = append(variants, v)
	}
	return variants, nil
}

// start starts the benchmark's Redis and, when a case needs it,
// ZooKeeper, and finds MariaDB's process. The caller defers stop at once,
// whatever the error.
func start(ctx context.Context, o options, root, k6 string, cases []benchCase) (*bench, error) {
	b := &bench{o: o, root: root, k6: k6, tp: newTopologies(o.out), rp: &replicated{dir: filepath.Join(o.out, "mysql-replicated")}}
	var err error
	if b.rs, err = startRedis(ctx, o.out); err != nil {
		return b, err
	}
	mdb, err := sql.Open("mysql", o.dsn)
	if err != nil {
		return b, err
	}
	defer mdb.Close()
	if b.dbPID, err = mariadbPID(ctx, mdb); err != nil {
		fmt.Fprintln(os.Stderr, "bench: MariaDB's CPU is not measured:", err)
	}
	if needsZooKeeper(cases) {
		if b.zk, err = startZooKeeper(ctx, &b.o); err != nil {
			return b, err
		}
	}
	return b, nil
}

// stop stops what start and the cases started.
func (b *bench) stop() {
	if b.zk != nil {
		b.zk.Stop()
	}
	b.rp.stop()
	b.tp.stop()
	if b.rs != nil {
		b.rs.stop()
	}
}

// runAll runs every case on every variant that applies, printing a line
// per row; failed reports a row oversold or answered outside the contract.
func (b *bench) runAll(ctx context.Context, cases []benchCase, variants []variant, stdout io.Writer) (rows []row, failed bool, err error) {
	i := 0
	for rep := range b.o.repeat {
		for _, c := range cases {
			for _, v := range sideOrder(variants, rep) {
				if c.ceiling && v.label != "" && !v.runtime { // the ceiling is the same for every other variant
					continue
				}
				if c.design() && v.compare == "" { // a design's code is not the ref's
					continue
				}
				r, err := b.runCase(ctx, c, v, i)
				i++
				if err != nil {
					return rows, failed, fmt.Errorf("%s: %w", c.label(), err)
				}
				fmt.Fprintf(stdout, "  %-44s %-9s %-10s %8.0f orders/s %8.0f rejects/s %5d 503s  p50 %5.1f p99 %6.1f ms  cpu %5.0f µs/req (k6 %2.0f%%, other %.1f cores)  %s\n",
					r.Case, r.Load, r.Variant, r.OrdersPerSec, r.RejectsPerSec, r.Unavailable, r.P50, r.P99, r.CPU.Total(), 100*r.CPU.K6Share, r.CPU.OtherCores, r.Verified)
				if r.Unpublished > 0 {
					fmt.Fprintf(stdout, "  %-44s %d order events unpublished at the row's end: their relay and broker CPU fell outside it\n", "", r.Unpublished)
				}
				failed = failed || strings.HasPrefix(r.Verified, "VIOLATED") || r.Unexpected > 0
				rows = append(rows, r)
			}
		}
	}
	return rows, failed, nil
}

// sideOrder is the order of the sides in the rep-th run: as given, then
// reversed, and so on.
func sideOrder(variants []variant, rep int) []variant {
	if rep%2 == 0 {
		return variants
	}
	rev := slices.Clone(variants)
	slices.Reverse(rev)
	return rev
}

// writeResults prints the tables and writes them, and every row, into the
// results directory (bench.md, bench.json).
func (b *bench) writeResults(rows []row, stdout io.Writer) error {
	var table bytes.Buffer
	writeTable(&table, rows, b.o)
	fmt.Fprint(stdout, "\n", table.String())
	raw, _ := json.MarshalIndent(rows, "", "  ")
	if err := os.WriteFile(filepath.Join(b.o.out, "bench.json"), raw, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.o.out, "bench.md"), table.Bytes(), 0o644)
}
