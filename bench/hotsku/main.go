// Command hotsku measures one hot SKU's own limit: the order engine driven
// in-process (no HTTP) by concurrent buyers of one SKU, on a private
// MariaDB at durable settings (innodb_flush_log_at_trx_commit=1,
// sync_binlog=1, binary log on) and a private Redis; beside it, in the
// same run, the raw loop: one batch's statements issued back to back on
// one connection at the engine's batch size; then the same SKU sold by
// several engines (instances) sharing the database and the lock. Every
// sale ends audited: the orders exact in the database, or it fails.
//
//	go run ./bench/hotsku -buyers 3000 -duration 10s -engines 1,3
//	go run ./bench/hotsku -set 'batch 64:SECKILL_ORDER_BATCH_MAX=64;no linger:SECKILL_ORDER_LINGER=0'
//
// Figures are only comparable within one run: read the ratios.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/procstat"
	"github.com/seckill/seckill/internal/testenv/mariadb"
	"github.com/seckill/seckill/lock/locktest"
)

// durable are the server's own settings: every COMMIT is on disk, in the
// redo log and in the binary log, before it is answered. The log and pool
// are sized for a sale, not for a test.
var durable = []string{"--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1",
	"--innodb-log-file-size=256M", "--innodb-buffer-pool-size=512M"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "hotsku:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	buyers           int
	duration, warmup time.Duration
	engines          []int
	variants         []variant
	rounds           int
	clustered        bool   // also the raw loop with a batch's users side by side
	cpuprofile       string // a directory: each row's measured window's CPU profile, NN-name.pprof
}

// variant is a set of settings (SECKILL_* variables) every row runs with.
type variant struct {
	label string
	env   map[string]string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("hotsku", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
	fs.IntVar(&o.buyers, "buyers", 3000, "concurrent buyers of the one SKU, spread over the engines: more than 2 × order.batch_max per engine keeps its batches full")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured row")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured selling before each row")
	engines := fs.String("engines", "1,3", "engine counts to run, comma-separated; the first is also the raw loop's reference")
	set := fs.String("set", "", "'label:SECKILL_X=V,...;label2:...': each variant runs every row, after the defaults")
	fs.IntVar(&o.rounds, "rounds", 1, "times the whole sequence runs, interleaved")
	fs.BoolVar(&o.clustered, "clustered", false, "also run the raw loop with each batch's users side by side in the user indexes (r<tx>-<i>), not spread as the buyers' are")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "a directory: writes each row's CPU profile of this process (buyers, engines, the raw loop) over its measured window")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(*engines, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 8 {
			return o, fmt.Errorf("-engines %q: want counts from 1 to 8", *engines)
		}
		o.engines = append(o.engines, n)
	}
	o.variants = []variant{{label: "defaults"}}
	for _, v := range strings.Split(*set, ";") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		label, list, ok := strings.Cut(v, ":")
		if !ok {
			return o, fmt.Errorf("-set %q: want label:SECKILL_X=V[,SECKILL_Y=W]", v)
		}
		env := map[string]string{}
		for _, kv := range strings.Split(list, ",") {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || !strings.HasPrefix(k, "SECKILL_") {
				return o, fmt.Errorf("-set %q: %q is not SECKILL_X=V", v, kv)
			}
			env[k] = val
		}
		o.variants = append(o.variants, variant{label: label, env: env})
	}
	if o.buyers < 1 || o.duration <= 0 || o.warmup < 0 || o.rounds < 1 {
		return o, errors.New("-buyers, -duration and -rounds must be positive, -warmup not negative")
	}
	return o, nil
}

// servers are the run's private MariaDB and Redis.
type servers struct {
	dsn             string   // root, database seckill
	admin           *gorm.DB // the rows' SKUs, the raw loop's connection, the audits
	dbPID, redisPID int
	db              *mariadb.Server
	redis           *locktest.RedisProc
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "hotsku-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := start(ctx, dir)
	defer srv.stop()
	if err != nil {
		return err
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(stdout, "one hot SKU: %d buyers, %v rows after %v warm-up; %d CPUs, load %s; MariaDB %s\n",
		o.buyers, o.duration, o.warmup, runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), strings.Join(durable[:2], " "))
	fmt.Fprintf(stdout, "%-6s %-10s %-18s %9s %9s %8s %8s %9s %7s %7s %7s %7s %s\n", "round", "variant", "row", "orders/s",
		"orders/tx", "holds/s", "reads/tx", "fsyncs/tx", "cpu µs", "self", "db", "redis", "other answers")
	for r := range o.rounds {
		for _, v := range o.variants {
			if err := runVariant(ctx, o, srv, v, r+1, getenv, stdout); err != nil {
				return fmt.Errorf("%s: %w", v.label, err)
			}
		}
	}
	return nil
}

// start starts the private servers; the caller stops what it returns,
// even with an error.
func start(ctx context.Context, dir string) (servers, error) {
	var s servers
	tmpl, err := mariadb.Template(ctx, dir)
	if err != nil {
		return s, err
	}
	if s.db, err = mariadb.Start(ctx, tmpl, filepath.Join(dir, "db"), 1, durable...); err != nil {
		return s, err
	}
	var flush, sync, binlog int
	if err := s.db.Query(ctx, "SELECT @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin", &flush, &sync, &binlog); err != nil {
		return s, err
	}
	if flush != 1 || sync != 1 || binlog != 1 {
		return s, fmt.Errorf("the server runs flush_log_at_trx_commit=%d sync_binlog=%d log_bin=%d; want 1 1 1", flush, sync, binlog)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "db", "m.pid"))
	if err != nil {
		return s, err
	}
	if s.dbPID, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil {
		return s, err
	}
	if err := s.db.Exec(ctx, "CREATE DATABASE seckill"); err != nil {
		return s, err
	}
	s.dsn = s.db.RootDSN() + "seckill"
	if s.admin, err = database.OpenMySQL(s.dsn, database.Options{MaxOpenConns: 2, MaxIdleConns: 2}); err != nil {
		return s, err
	}
	if err := database.Migrate(ctx, s.admin, "up", io.Discard); err != nil {
		return s, err
	}
	if s.redis, err = locktest.StartRedis(ctx, dir); err != nil {
		return s, err
	}
	s.redisPID = s.redis.Pid()
	return s, nil
}

func (s servers) stop() {
	if s.admin != nil {
		database.Close(s.admin)
	}
	if s.db != nil {
		s.db.Kill()
	}
	if s.redis != nil {
		s.redis.Kill()
	}
}

// runVariant runs the engine rows and the raw loop with v's settings and
// prints their ratios.
func runVariant(ctx context.Context, o options, srv servers, v variant, round int, getenv func(string) string, stdout io.Writer) error {
	cfg, err := settings(v, getenv)
	if err != nil {
		return err
	}
	var first row
	for i, n := range o.engines {
		rw, err := sell(ctx, o, srv, cfg, n)
		if err != nil {
			return fmt.Errorf("%d engines: %w", n, err)
		}
		rw.print(stdout, round, v.label)
		if i == 0 {
			first = rw
			batch := max(1, int(first.perTx()+0.5))
			raw, err := rawLoop(ctx, o, srv, batch, false)
			if err != nil {
				return fmt.Errorf("raw loop: %w", err)
			}
			raw.print(stdout, round, v.label)
			if o.clustered {
				cl, err := rawLoop(ctx, o, srv, batch, true)
				if err != nil {
					return fmt.Errorf("raw loop, clustered: %w", err)
				}
				cl.print(stdout, round, v.label)
			}
			fmt.Fprintf(stdout, "%-6d %-10s ratio: %s / raw loop at its batch = %.2f× orders/s, %.2f× CPU/order\n", round, v.label,
				first.name, first.rate()/raw.rate(), first.cpuPerOrder()/raw.cpuPerOrder())
			continue
		}
		fmt.Fprintf(stdout, "%-6d %-10s ratio: %s / %s = %.2f× orders/s, %.2f× CPU/order\n", round, v.label,
			rw.name, first.name, rw.rate()/first.rate(), rw.cpuPerOrder()/first.cpuPerOrder())
	}
	return nil
}

// counts are what a row counts, read before and after it.
type counts struct {
	orders          int64
	self, db, redis time.Duration // this process (buyers, engines, the raw loop), mariadbd, redis-server
	tx              int64         // COMMITs on the server
	reads           int64         // SELECTs on the server: a transaction that reads the row sends two
	fsyncs          int64         // binary log group commits: one fsync each
	holds           int64         // lock obtains
}

func (c counts) minus(a counts) counts {
	return counts{orders: c.orders - a.orders, self: c.self - a.self, db: c.db - a.db, redis: c.redis - a.redis,
		tx: c.tx - a.tx, reads: c.reads - a.reads, fsyncs: c.fsyncs - a.fsyncs, holds: c.holds - a.holds}
}

// row is what one measured row counted.
type row struct {
	name string
	d    time.Duration
	counts
	other map[string]int // answers other than created
}

func (r row) rate() float64        { return float64(r.orders) / r.d.Seconds() }
func (r row) perTx() float64       { return float64(r.orders) / float64(max(r.tx, 1)) }
func (r row) cpuPerOrder() float64 { return us(r.self+r.db+r.redis) / float64(max(r.orders, 1)) }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (r row) print(w io.Writer, round int, label string) {
	per := func(d time.Duration) float64 { return us(d) / float64(max(r.orders, 1)) }
	other := "-"
	if len(r.other) > 0 {
		other = fmt.Sprint(r.other)
	}
	tx := float64(max(r.tx, 1))
	fmt.Fprintf(w, "%-6d %-10s %-18s %9.0f %9.1f %8.0f %8.2f %9.2f %7.1f %7.1f %7.1f %7.1f %s\n", round, label, r.name, r.rate(), r.perTx(),
		float64(r.holds)/r.d.Seconds(), float64(r.reads)/2/tx, float64(r.fsyncs)/tx, r.cpuPerOrder(), per(r.self), per(r.db), per(r.redis), other)
}

// counters reads the processes' CPU and the server's COMMIT and binary
// log group commit counts (the server is ours alone).
func counters(ctx context.Context, srv servers) (counts, error) {
	var s counts
	var err error
	if s.self, err = procstat.CPU(procstat.Self); err != nil {
		return s, err
	}
	if s.db, err = procstat.CPU(srv.dbPID); err != nil {
		return s, err
	}
	if s.redis, err = procstat.CPU(srv.redisPID); err != nil {
		return s, err
	}
	for name, v := range map[string]*int64{"Com_commit": &s.tx, "Com_select": &s.reads, "Binlog_group_commits": &s.fsyncs} {
		if err := srv.db.Query(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'", &name, v); err != nil {
			return s, err
		}
	}
	return s, nil
}

// settle waits, at most a minute, until InnoDB has purged the history of
// the rows before (every UPDATE of the hot row leaves an undo record):
// its purge would otherwise run on the next row's CPU.
func settle(ctx context.Context, srv servers) error {
	for range 600 {
		var n int64
		if err := srv.db.Query(ctx, "SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'", &n); err != nil {
			return err
		}
		if n < 100 {
			return nil
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.New("InnoDB's purge did not catch up within a minute")
}
