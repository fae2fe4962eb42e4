// Command loadtest runs the flash-sale load test and prints its verdict:
// it starts MariaDB, Redis and N seckill instances (or targets a running
// deployment), drives k6 at one SKU, optionally kills Redis, an instance or
// MariaDB mid-sale, and verifies that nothing was oversold, lost or
// doubled. It exits 1 on any violated invariant, 2 when the run itself
// could not be carried out.
//
//	go run ./loadtest/cmd/loadtest                 # full run, 3 instances
//	go run ./loadtest/cmd/loadtest -smoke          # ~30 seconds
//	go run ./loadtest/cmd/loadtest -fault redis    # Redis killed mid-sale
//	go run ./loadtest/cmd/loadtest -lock zookeeper -fault zk-leader  # ZooKeeper's leader killed mid-sale
//	go run ./loadtest/cmd/loadtest -scenario invented-skus  # 20,000 orders for ids that do not exist
//	go run ./loadtest/cmd/loadtest -scenario lifecycle      # pay, cancel, expire: returned units resold; leader frozen, another killed
//	go run ./loadtest/cmd/loadtest -scenario idle-restock   # sell out, idle past the sold-out marks, restock, burst: no stale sold_out
//	go run ./loadtest/cmd/loadtest -scenario fair           # 12,000 buyers for 3,000 units over 1s: who was served out of arrival order
//	go run ./loadtest/cmd/loadtest -target -base-urls https://a,https://b -admin-token ...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/loadtest/harness"
)

// errViolated marks a run that completed and found a broken invariant.
var errViolated = errors.New("invariants violated")

func main() {
	// The driver logs every connection a MariaDB restart breaks; the
	// runner expects those and reports what matters itself.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errViolated):
		os.Exit(1)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
}

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }
func (e *envFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

// smokeRequested reports whether args hold -smoke before any non-flag.
func smokeRequested(args []string) bool {
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "smoke", "smoke=true", "smoke=1":
			return true
		}
	}
	return false
}

// clusterRequested reports whether args hold -redis cluster.
func clusterRequested(args []string) bool {
	for i, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "redis=cluster":
			return true
		case "redis":
			if i+1 < len(args) && args[i+1] == harness.RedisCluster {
				return true
			}
		}
	}
	return false
}

// options is the command line: the sale's configuration and the
// scenario's numbers.
type options struct {
	cfg      harness.Config
	quiet    bool
	scenario string
	requests int   // -scenario invented-skus
	units    int64 // -scenario lifecycle
	buyers   int   // -scenario fair
}

// parseFlags reads the command line. -smoke (or -redis cluster) picks the
// defaults the other flags start from, so that "-smoke -stock 1000"
// combines both.
func parseFlags(args []string, stderr io.Writer) (options, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := harness.Default()
	switch {
	case smokeRequested(args):
		def = harness.Smoke()
	case clusterRequested(args):
		def = harness.ClusterSale() // 100 SKUs, at a rate this box serves
	}
	fs.Bool("smoke", false, "the ~30 second run of make test: small stock, low rate (other flags still apply)")
	var (
		o                    options
		baseURLs, redisAddrs listFlag
		env                  envFlag
	)
	cfg := &o.cfg
	fs.IntVar(&cfg.Instances, "instances", def.Instances, "service instances to start")
	fs.Int64Var(&cfg.Stock, "stock", def.Stock, "initial stock of the SKU (with -skus, spread over them)")
	fs.IntVar(&cfg.SKUs, "skus", def.SKUs, fmt.Sprintf("SKUs the stock is spread over, each checked on its own (0: 1, or %d with -redis cluster)", harness.DefaultClusterSKUs))
	fs.Int64Var(&cfg.PerUserLimit, "per-user-limit", def.PerUserLimit, "the SKU's per-user limit")
	fs.IntVar(&cfg.StartRate, "start-rate", def.StartRate, "arrival rate at the start, orders/s")
	fs.IntVar(&cfg.Rate, "rate", def.Rate, "peak arrival rate, orders/s (past the machine's limit k6 drops arrivals)")
	fs.DurationVar(&cfg.Ramp, "ramp", def.Ramp, "time to ramp to -rate")
	fs.DurationVar(&cfg.Hold, "hold", def.Hold, "time held at -rate")
	fs.IntVar(&cfg.MaxVUs, "max-vus", def.MaxVUs, "k6 virtual users at most")
	fs.DurationVar(&cfg.P95, "p95", def.P95, "latency bound: 95% of order requests faster than this (0: 1.5s, 3s with a fault)")
	fs.DurationVar(&cfg.P99, "p99", def.P99, "latency bound: 99% of order requests faster than this (0: 3s, 6s with a fault)")
	fs.BoolVar(&cfg.ExpectSoldOut, "expect-sold-out", def.ExpectSoldOut, "require the sale to sell out (sold == stock, stock == 0)")
	fs.StringVar(&cfg.Fault, "fault", def.Fault, "fault injected mid-sale: "+strings.Join(harness.Faults, ", "))
	fs.Float64Var(&cfg.FaultAt, "fault-at", def.FaultAt, "share of the stock sold when the fault strikes")
	fs.DurationVar(&cfg.FaultFor, "fault-for", def.FaultFor, "how long the victim stays down")
	fs.DurationVar(&cfg.UnavailableGrace, "unavailable-grace", def.UnavailableGrace, "503s still accepted this long after the victim is back")
	fs.BoolVar(&cfg.Target, "target", false, "verify a deployment already running at -base-urls (nothing is started)")
	fs.Var(&baseURLs, "base-urls", "comma-separated base URLs of the service (target mode)")
	fs.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("SECKILL_ADMIN_TOKEN"), "admin token (target mode; default $SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&cfg.ShopperSecret, "shopper-secret", os.Getenv("SECKILL_AUTH_JWT_SECRET"), "the service's HS256 auth.jwt.secret: k6 signs buyers' tokens (target mode; default $SECKILL_AUTH_JWT_SECRET; empty: no tokens, for auth.shopper none)")
	fs.StringVar(&cfg.OrderIDKey, "order-id-key", os.Getenv("SECKILL_AUTH_ORDER_ID_KEY"), "the service's auth.order_id_key, to check acknowledged orders (target mode; default $SECKILL_AUTH_ORDER_ID_KEY)")
	fs.StringVar(&cfg.MySQLDSN, "mysql-dsn", def.MySQLDSN, "MariaDB/MySQL server DSN, no database: each run creates its own")
	fs.IntVar(&cfg.MySQLMinReplicas, "mysql-min-replicas", def.MySQLMinReplicas, "the instances' mysql.min_replicas under -fault mysql-failover (0 shows the loss it prevents)")
	fs.IntVar(&cfg.RedisServers, "redis-servers", 1, "private redis-servers to start; more than one selects Redlock")
	fs.StringVar(&cfg.Redis, "redis", "", "topology of -fault failover (or of -fault none, to measure it without a fault): sentinel (default: master + 2 replicas + 3 sentinels) or cluster (3 masters + 3 replicas)")
	fs.StringVar(&cfg.Lock, "lock", harness.LockRedis, "the instances' lock backend: redis, or zookeeper (a private 3-node ensemble, no Redis; -fault zk-leader kills its leader)")
	fs.IntVar(&cfg.RedisKill, "redis-kill", 1, "redis-servers the redis fault kills (of 3: 1 is a minority, 2 a majority)")
	fs.Var(&redisAddrs, "redis-addrs", "use these Redis servers instead of starting a private redis-server")
	fs.StringVar(&cfg.ServiceBin, "bin", "", "prebuilt seckill binary (default: go build ./cmd/seckill)")
	fs.Var(&env, "env", "KEY=VALUE for every instance, repeatable (e.g. SECKILL_ORDER_LINGER=0)")
	fs.StringVar(&cfg.K6, "k6", "", "k6 binary (default: PATH, then $(go env GOPATH)/bin, else go install go.k6.io/k6@"+harness.K6Version+")")
	fs.StringVar(&cfg.Name, "name", "", "run name (default: time and fault)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run's database and work directory")
	fs.DurationVar(&cfg.SoldOutBound, "soldout-bound", harness.DefaultSoldOutBound, "the history check accepts a sold_out answer if the stock was gone at some point this long before it was asked (sold_out.local_ttl + sold_out.recheck)")
	fs.IntVar(&cfg.Restocks, "restocks", 0, "restock the SKU this many times during the sale, each time it sells out, to a quarter of -stock")
	fs.IntVar(&cfg.HistoryMaxOps, "history-max-ops", 40000, "operations the history check's search takes at most; a longer history is not concluded")
	fs.BoolVar(&o.quiet, "q", false, "print only the summary")
	fs.StringVar(&o.scenario, "scenario", "sale", "sale: the k6 flash sale; invented-skus: orders for SKU ids that do not exist, measuring what stays (RSS, goroutines, Redis keys); lifecycle: buyers pay, cancel or abandon until every unit is paid, the sweeper's leader frozen and its successor killed; idle-restock: sell-outs, idle gaps, restocks through one instance and bursts at the others; fair: -buyers over 1s round-robin over the instances, retrying 429/503 with the same key, counting late winners and early losers")
	fs.IntVar(&o.requests, "requests", 20000, "orders sent by -scenario invented-skus")
	fs.Int64Var(&o.units, "units", 1000, "units sold by -scenario lifecycle")
	fs.IntVar(&o.buyers, "buyers", 12000, "buyers of -scenario fair, one unit each, arriving evenly over 1s (its units: -stock, 3000 unless set)")
	if err := fs.Parse(args); err != nil {
		return o, fs, err
	}
	if fs.NArg() > 0 {
		return o, fs, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.BaseURLs, cfg.RedisAddrs, cfg.Env = baseURLs, redisAddrs, env
	return o, fs, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, fs, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg := o.cfg
	if cfg.Fault == harness.FaultMySQLFailover {
		mysqlFailoverDefaults(fs, &cfg)
	}
	cfg.Log = stderr
	if o.quiet {
		cfg.Log = io.Discard
	}
	switch o.scenario {
	case "invented-skus":
		res, err := harness.RunInvented(ctx, cfg, o.requests)
		return report(res, err, stdout)
	case "lifecycle":
		res, err := harness.RunLifecycle(ctx, cfg, o.units)
		return report(res, err, stdout)
	case "idle-restock":
		res, err := harness.RunIdleRestock(ctx, cfg)
		return report(res, err, stdout)
	case "fair":
		if !flagSet(fs, "stock") {
			cfg.Stock = 3000
		}
		res, err := harness.RunFair(ctx, cfg, cfg.Stock, o.buyers)
		return report(res, err, stdout)
	case "sale":
	default:
		return fmt.Errorf("-scenario %q: want sale, invented-skus, lifecycle, idle-restock or fair", o.scenario)
	}
	res, err := harness.Run(ctx, cfg)
	if err != nil {
		return err
	}
	res.Summary.WriteText(stdout, res.Dir)
	if !res.Pass() {
		return errViolated
	}
	return nil
}

// scenarioResult is what a scenario other than the k6 sale reports.
type scenarioResult interface {
	WriteText(io.Writer)
	Pass() bool
}

// report prints a scenario's result and fails the run when it did not pass.
func report(res scenarioResult, err error, stdout io.Writer) error {
	if err != nil {
		return err
	}
	res.WriteText(stdout)
	if !res.Pass() {
		return errViolated
	}
	return nil
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// mysqlFailoverDefaults gives -fault mysql-failover the scenario of its
// issue where a flag does not say otherwise: 4,000 units, the replicas
// stalled 4s, arrivals at a rate that keeps the sale going through the
// failover.
func mysqlFailoverDefaults(fs *flag.FlagSet, cfg *harness.Config) {
	if !flagSet(fs, "stock") {
		cfg.Stock = 4000
	}
	if !flagSet(fs, "fault-for") {
		cfg.FaultFor = 4 * time.Second
	}
	if !flagSet(fs, "rate") {
		cfg.Rate = 400
	}
}
