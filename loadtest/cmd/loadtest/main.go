// Command loadtest runs the flash-sale load test (make loadtest) and
// prints its verdict: 0 on PASS, 1 on a violated invariant, 2 when the run
// could not be carried out. loadtest/README.md shows its runs, -h every flag.
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

	"github.com/seckill/seckill/internal/toolchain"
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

// list appends each comma-separated value of a flag to *dst.
func list(dst *[]string) func(string) error {
	return func(v string) error {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*dst = append(*dst, s)
			}
		}
		return nil
	}
}

// options is the command line: the sale's configuration and the
// scenario's numbers.
type options struct {
	cfg      harness.Config
	smoke    bool
	quiet    bool
	scenario string
	requests int   // -scenario invented-skus
	units    int64 // -scenario lifecycle
	buyers   int   // -scenario fair
}

// parseFlags reads the command line. -smoke, -redis cluster, -fault
// mysql-failover and -scenario fair pick the defaults the other flags
// start from, so that "-smoke -stock 1000" combines both: the line is
// read once to learn them and once more over them.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	o, err := parseWith(harness.Default(), args, io.Discard)
	if err != nil {
		return parseWith(harness.Default(), args, stderr) // says what is wrong
	}
	def := harness.Default()
	switch {
	case o.smoke:
		def = harness.Smoke()
	case o.cfg.Redis == harness.RedisCluster:
		def = harness.ClusterSale() // 100 SKUs, at a rate this box serves
	}
	if o.cfg.Fault == harness.FaultMySQLFailover {
		// The scenario of its issue: 4,000 units, the replicas stalled 4s,
		// arrivals at a rate that keeps the sale going through the failover.
		def.Stock, def.FaultFor, def.Rate = 4000, 4*time.Second, 400
	}
	if o.scenario == "fair" {
		def.Stock = 3000
	}
	return parseWith(def, args, stderr)
}

// parseWith reads the command line over the defaults def.
func parseWith(def harness.Config, args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	cfg := &o.cfg
	fs.BoolVar(&o.smoke, "smoke", false, "the ~30 second run of make test: small stock, low rate (other flags still apply)")
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
	fs.Func("base-urls", "comma-separated base URLs of the service (target mode)", list(&cfg.BaseURLs))
	fs.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("SECKILL_ADMIN_TOKEN"), "admin token (target mode; default $SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&cfg.ShopperSecret, "shopper-secret", os.Getenv("SECKILL_AUTH_JWT_SECRET"), "the service's HS256 auth.jwt.secret: k6 signs buyers' tokens (target mode; default $SECKILL_AUTH_JWT_SECRET; empty: no tokens, for auth.shopper none)")
	fs.StringVar(&cfg.OrderIDKey, "order-id-key", os.Getenv("SECKILL_AUTH_ORDER_ID_KEY"), "the service's auth.order_id_key, to check acknowledged orders (target mode; default $SECKILL_AUTH_ORDER_ID_KEY)")
	fs.StringVar(&cfg.MySQLDSN, "mysql-dsn", def.MySQLDSN, "MariaDB/MySQL server DSN, no database: each run creates its own")
	fs.IntVar(&cfg.MySQLMinReplicas, "mysql-min-replicas", def.MySQLMinReplicas, "the instances' mysql.min_replicas under -fault mysql-failover (0 shows the loss it prevents)")
	fs.IntVar(&cfg.RedisServers, "redis-servers", 1, "private redis-servers to start; more than one selects Redlock")
	fs.StringVar(&cfg.Redis, "redis", "", "topology of -fault failover (or of -fault none, to measure it without a fault): sentinel (default: master + 2 replicas + 3 sentinels) or cluster (3 masters + 3 replicas)")
	fs.StringVar(&cfg.Lock, "lock", harness.LockRedis, "the instances' lock backend: redis, or zookeeper (a private 3-node ensemble, no Redis; -fault zk-leader kills its leader)")
	fs.IntVar(&cfg.RedisKill, "redis-kill", 1, "redis-servers the redis fault kills (of 3: 1 is a minority, 2 a majority)")
	fs.Func("redis-addrs", "use these Redis servers instead of starting a private redis-server", list(&cfg.RedisAddrs))
	fs.StringVar(&cfg.ServiceBin, "bin", "", "prebuilt seckill binary (default: go build ./cmd/seckill)")
	fs.Func("env", "KEY=VALUE for every instance, repeatable (e.g. SECKILL_ORDER_LINGER=0)", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q: want KEY=VALUE", v)
		}
		cfg.Env = append(cfg.Env, v)
		return nil
	})
	fs.StringVar(&cfg.K6, "k6", "", "k6 binary (default: PATH, then $(go env GOPATH)/bin, else go install go.k6.io/k6@"+toolchain.K6Version+")")
	fs.StringVar(&cfg.Name, "name", "", "run name (default: time and fault)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run's database and work directory")
	fs.DurationVar(&cfg.SoldOutBound, "soldout-bound", harness.DefaultSoldOutBound, "the history check accepts a sold_out answer if the stock was gone at some point this long before it was asked (sold_out.local_ttl + sold_out.recheck)")
	fs.IntVar(&cfg.Restocks, "restocks", 0, "restock the SKU this many times during the sale, each time it sells out, to a quarter of -stock")
	fs.IntVar(&cfg.HistoryMaxOps, "history-max-ops", 40000, "operations the history check's search takes at most; a longer history is not concluded")
	fs.BoolVar(&cfg.Events, "events", def.Events, "the instances write order events, relayed to a private nats-server, and after the run the stream replayed and deduplicated must be the outbox (not in target mode nor -scenario invented-skus)")
	fs.BoolVar(&o.quiet, "q", false, "print only the summary")
	fs.StringVar(&o.scenario, "scenario", "sale", "sale: the k6 flash sale; invented-skus: orders for SKU ids that do not exist, measuring what stays (RSS, goroutines, Redis keys); lifecycle: buyers pay, cancel or abandon until every unit is paid, the sweeper's leader frozen and its successor killed; idle-restock: sell-outs, idle gaps, restocks through one instance and bursts at the others; fair: -buyers over 1s round-robin over the instances, retrying 429/503 with the same key, counting late winners and early losers; waitlist: a sale's second act, returned units and a restock going to 1,000 waiters in arrival order (-fault none, instance, redis or mysql)")
	fs.IntVar(&o.requests, "requests", 20000, "orders sent by -scenario invented-skus")
	fs.Int64Var(&o.units, "units", 1000, "units sold by -scenario lifecycle")
	fs.IntVar(&o.buyers, "buyers", 12000, "buyers of -scenario fair, one unit each, arriving evenly over 1s (its units: -stock, 3000 unless set)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg := o.cfg
	cfg.Log = stderr
	if o.quiet {
		cfg.Log = io.Discard
	}
	var res result
	switch o.scenario {
	case "sale":
		res, err = harness.Run(ctx, cfg)
	case "invented-skus":
		res, err = harness.RunInvented(ctx, cfg, o.requests)
	case "lifecycle":
		res, err = harness.RunLifecycle(ctx, cfg, o.units)
	case "idle-restock":
		res, err = harness.RunIdleRestock(ctx, cfg)
	case "fair":
		res, err = harness.RunFair(ctx, cfg, cfg.Stock, o.buyers)
	case "waitlist":
		res, err = harness.RunWaitlist(ctx, cfg)
	default:
		return fmt.Errorf("-scenario %q: want sale, invented-skus, lifecycle, idle-restock, fair or waitlist", o.scenario)
	}
	if err != nil {
		return err
	}
	res.WriteText(stdout)
	if !res.Pass() {
		return errViolated
	}
	return nil
}

// result is what the sale and the other scenarios report.
type result interface {
	WriteText(io.Writer)
	Pass() bool
}
