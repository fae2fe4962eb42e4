// Package harness runs the load test end to end: it brings up MariaDB,
// Redis and N service instances, creates a SKU, drives k6 at it
// (optionally killing Redis, an instance or MariaDB mid-sale), then checks
// from the database and the API that nothing was oversold, lost or
// doubled; and the other scenarios (invented-skus, lifecycle,
// idle-restock, fair) on the same bring-up.
//
// Everything it starts it stops, however the run ends.
package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// Faults the runner can inject mid-sale.
const (
	FaultNone     = "none"
	FaultRedis    = "redis"    // SIGKILL the Redis server, restart it empty
	FaultInstance = "instance" // SIGKILL one service instance, restart it
	FaultMySQL    = "mysql"    // SIGKILL MariaDB (a private one), restart it
	FaultFailover = "failover" // Sentinel: SIGKILL the master, let Sentinel promote a replica
	FaultPause    = "pause"    // SIGSTOP one service instance, SIGCONT it
)

// Faults lists the fault modes.
var Faults = []string{FaultNone, FaultRedis, FaultInstance, FaultMySQL, FaultFailover, FaultPause, FaultZKLeader, FaultMySQLFailover}

// Config is one load run. Zero numbers and strings take the defaults of
// Default; booleans do not, so start from Default or Smoke.
type Config struct {
	Instances int   // service instances started, default 3
	Stock     int64 // initial stock of the SKU (with SKUs, of them all)
	// SKUs is how many SKUs the sale spreads Stock over (each its share,
	// sold and checked on its own). Default 1; DefaultClusterSKUs with
	// Redis "cluster", so that the sale's keys spread over the slots.
	SKUs         int
	PerUserLimit int64         // the SKU's per-user limit, default 2
	StartRate    int           // k6 arrival rate at the start, orders/s
	Rate         int           // peak arrival rate, orders/s
	Ramp         time.Duration // time to reach Rate
	Hold         time.Duration // time at Rate
	MaxVUs       int           // k6 VU ceiling; past it k6 drops arrivals
	// P95 and P99 bound the latency of an order request; zero takes the
	// defaults: 1.5s and 3s, or 3s and 6s in a fault run, whose degraded
	// path and retries are slower.
	P95, P99      time.Duration
	ExpectSoldOut bool // require sold == stock at the end

	Fault    string        // one of Faults
	FaultAt  float64       // share of the stock sold when the fault strikes, default 0.3
	FaultFor time.Duration // how long the victim stays down, default 3s
	// UnavailableGrace is how long after the victim is back 503s are still
	// accepted (reconnects, pool refill), default 10s.
	UnavailableGrace time.Duration

	// Target mode: verify a deployment already running at BaseURLs.
	Target     bool
	BaseURLs   []string
	AdminToken string
	// ShopperSecret is the service's auth.jwt.secret: k6 signs each
	// buyer's HS256 token with it (target mode; generated otherwise).
	// Empty in target mode: the buyers send no token (auth.shopper none).
	ShopperSecret string
	// OrderIDKey is the service's auth.order_id_key, to match the opaque
	// ids buyers were told to the database's (target mode; generated otherwise).
	OrderIDKey string

	// RedisServers is how many private redis-servers to start, default 1;
	// more than one puts the service in Redlock mode.
	RedisServers int
	// RedisKill is how many of them the redis fault kills, default 1:
	// with 3 servers, 1 is a minority (the quorum holds), 2 a majority.
	RedisKill int
	// Redis is the topology the failover fault runs on: "sentinel" (the
	// default) or "cluster" (3 masters + 3 replicas).
	Redis string
	// Lock is the instances' lock backend: LockRedis (the default) or
	// LockZooKeeper (a private 3-node ensemble, no Redis).
	Lock string

	// MySQLMinReplicas is the instances' mysql.min_replicas under the
	// mysql-failover fault, default 1; 0 shows the loss it prevents.
	MySQLMinReplicas int

	MySQLDSN   string   // server DSN without a database, default root@tcp(127.0.0.1:3306)/
	RedisAddrs []string // use these instead of private redis-servers (no Redis fault then)
	ServiceBin string   // prebuilt seckill binary; empty builds ./cmd/seckill
	Env        []string // extra KEY=VALUE for every instance (SECKILL_ORDER_LINGER=0, ...)
	K6         string   // k6 binary; empty finds or installs it
	Keep       bool     // keep the database and the work directory
	Name       string   // run name in loadtest/results, default time + fault

	Log io.Writer // progress; nil discards

	// Events runs the instances with order events on, relayed to a
	// private nats-server, and holds the stream to the outbox after the
	// run (checkStream); not in target mode.
	Events bool

	// SoldOutBound is the only staleness of a sold_out answer the history
	// check accepts, default DefaultSoldOutBound (sold_out.local_ttl + sold_out.recheck).
	SoldOutBound time.Duration
	// Restocks is how many times k6 restocks the SKU during the sale,
	// each time it sells out, to a quarter of Stock; default 0.
	Restocks int
	// HistoryMaxOps bounds the operations the history check's search
	// takes; past it the check is not concluded. Zero: 40,000.
	HistoryMaxOps int

	moduleRoot string // the seckill module: sale.js, the results, the service's source
}

// Default is the full run's configuration.
func Default() Config {
	return Config{
		Instances:        3,
		Stock:            20000,
		PerUserLimit:     2,
		StartRate:        100,
		Rate:             4000,
		Ramp:             20 * time.Second,
		Hold:             20 * time.Second,
		MaxVUs:           3000,
		ExpectSoldOut:    true,
		Fault:            FaultNone,
		FaultAt:          0.3,
		FaultFor:         3 * time.Second,
		UnavailableGrace: 10 * time.Second,
		RedisServers:     1,
		RedisKill:        1,
		MySQLDSN:         "root@tcp(127.0.0.1:3306)/",
		MySQLMinReplicas: 1,
		Events:           true,
	}
}

// Smoke is the short run of `make test`: about 30 seconds, small stock.
func Smoke() Config {
	c := Default()
	c.Stock, c.StartRate, c.Rate, c.Ramp, c.Hold, c.MaxVUs = 300, 20, 250, 5*time.Second, 8*time.Second, 500
	// CI machines are shared and the other tests run beside this one.
	c.P95, c.P99 = 3*time.Second, 6*time.Second
	return c
}

// Result is the outcome of a run.
type Result struct {
	Summary Summary
	Dir     string // results directory
}

// Pass reports the verdict: every invariant held and k6's thresholds passed.
func (r Result) Pass() bool { return r.Summary.Pass }

// WriteText prints the summary and where the results are.
func (r Result) WriteText(w io.Writer) { r.Summary.WriteText(w, r.Dir) }

// Run performs one load run and returns its summary. The error is for a
// run that could not be carried out (a server that would not start, k6
// missing); a run that found a violation returns a failing Result and a
// nil error.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	cfg, err = normalize(cfg)
	if err != nil {
		return res, err
	}
	r, err := newRun(cfg, saleName(cfg), &http.Client{Timeout: 30 * time.Second})
	defer r.tearDown()
	res.Dir = r.dir
	if err != nil {
		return res, err
	}
	if r.cfg.K6, err = EnsureK6(ctx, cfg.K6, r.log); err != nil { // before any server starts
		return res, err
	}
	if err := r.prepareSale(ctx); err != nil {
		return res, err
	}
	k6Start, k6res, err := r.sale(ctx)
	if err != nil {
		return res, err
	}
	crashed := r.checkAlive()
	sum, err := r.verify(ctx, k6Start, k6res)
	if err != nil {
		return res, err
	}
	if crashed != nil {
		sum.Violations = append(sum.Violations, verify.Violation{Name: InstanceExited, Message: crashed.Error()})
		sum.Pass = false
	}
	res.Summary = sum
	return res, r.writeResults(sum)
}

// saleName is the run's name: Name, else the time and the fault (or target).
func saleName(cfg Config) string {
	switch {
	case cfg.Name != "":
		return cfg.Name
	case cfg.Target:
		return time.Now().Format("20060102-150405") + "-target"
	}
	return time.Now().Format("20060102-150405") + "-" + cfg.Fault
}

// prepareSale brings up the servers (or takes the target's) and creates
// the sale's SKUs.
func (r *run) prepareSale(ctx context.Context) error {
	cfg := r.cfg
	if cfg.Target {
		r.baseURLs, r.token, r.shopper = cfg.BaseURLs, cfg.AdminToken, cfg.ShopperSecret
		if err := r.setOrderIDs(cfg.OrderIDKey); err != nil {
			return err
		}
	} else if err := r.bringUp(ctx); err != nil {
		return err
	}
	if err := r.createSKUs(ctx); err != nil {
		return err
	}
	if r.myfail != nil {
		id, err := r.createSKU(ctx, "failover writes "+r.id, writeSKU, 1)
		if err != nil {
			return err
		}
		r.myfail.writes.sku = id
	}
	if len(r.skuIDs) > 1 {
		r.event("%d skus created from %d: stock %d in all, per-user limit %d", len(r.skuIDs), r.skuID, cfg.Stock, cfg.PerUserLimit)
	} else {
		r.event("sku %d created: stock %d, per-user limit %d", r.skuID, cfg.Stock, cfg.PerUserLimit)
	}
	return nil
}

// sale runs k6 (and its restocks, with -restocks) while the monitor and
// the lock sampler watch, and returns when k6 started and what it left.
func (r *run) sale(ctx context.Context) (time.Time, k6Result, error) {
	r.loadBefore = loadAverage()
	mctx, stopMonitor := context.WithCancel(ctx)
	var wg sync.WaitGroup
	k6Start := time.Now()
	wg.Go(func() { r.watch(mctx, k6Start) })
	r.locks = newLockInspection()
	wg.Go(func() { r.sampleLocks(mctx, r.locks) })
	if r.myfail != nil {
		wg.Go(func() { r.failoverWrites(mctx) })
	}
	k6res, k6err := r.runK6(ctx)
	r.event("k6 finished: exit %d", k6res.ExitCode)
	r.saveMetrics(ctx)
	stopMonitor()
	wg.Wait()
	if r.myfail != nil {
		r.myfail.writes.pending.Wait() // the fault's restock is under way once wg is done
	}
	switch {
	case k6err != nil:
		return k6Start, k6res, k6err
	case r.monitor.faultErr != nil:
		return k6Start, k6res, fmt.Errorf("fault injection: %w", r.monitor.faultErr)
	}
	return k6Start, k6res, ctx.Err()
}
