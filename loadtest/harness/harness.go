// Package harness runs the load test end to end (loadtest/README.md): it
// brings up the servers and the service's instances, drives the sale or a
// scenario, strikes the fault, and checks everything; everything it
// starts it stops, however the run ends.
package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/toolchain"
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
	FaultBroker   = "broker"   // SIGKILL the events' nats-server, restart it (-fault-for 30s: issue 51's outage)
)

// Faults lists the fault modes.
var Faults = []string{FaultNone, FaultRedis, FaultInstance, FaultMySQL, FaultFailover, FaultPause, FaultZKLeader, FaultMySQLFailover, FaultBroker}

// Config is one load run; cmd/loadtest's flags say what each field means.
// Start from Default or Smoke: zero SKUs, P95 and P99 take the defaults
// the topology and the fault imply.
type Config struct {
	Instances    int
	Stock        int64 // of the sale's SKUs together
	SKUs         int   // default 1, DefaultClusterSKUs on Redis Cluster (the keys spread over the slots)
	PerUserLimit int64
	StartRate    int // k6's arrivals, orders/s, from StartRate to Rate over Ramp, then Hold
	Rate         int
	Ramp, Hold   time.Duration
	MaxVUs       int
	// P95 and P99 bound an order request's latency; zero: 1.5s and 3s, or
	// 3s and 6s in a fault run, whose degraded path and retries are slower.
	P95, P99      time.Duration
	ExpectSoldOut bool

	Fault            string  // one of Faults
	FaultAt          float64 // share of the stock sold when the fault strikes
	FaultFor         time.Duration
	UnavailableGrace time.Duration // 503s accepted this long after the victim is back

	// Target mode: verify a deployment already running at BaseURLs, whose
	// auth.jwt.secret (empty for auth.shopper none) and auth.order_id_key
	// the runner is given; otherwise it generates them.
	Target        bool
	BaseURLs      []string
	AdminToken    string
	ShopperSecret string
	OrderIDKey    string

	RedisServers     int    // private redis-servers; more than one: Redlock
	RedisKill        int    // of them, killed by the redis fault
	Redis            string // the failover fault's topology: RedisSentinel or RedisCluster
	Lock             string // LockRedis or LockZooKeeper
	MySQLMinReplicas int    // under the mysql-failover fault
	MySQLDSN         string // a server, without a database: each run creates its own
	RedisAddrs       []string
	ServiceBin       string // empty: ./cmd/seckill built
	Env              []string
	K6               string // empty: found or installed
	Keep             bool
	Name             string
	Log              io.Writer // progress; nil discards
	Events           bool      // the instances relay order events to a private nats-server (checkStream)
	SoldOutBound     time.Duration
	Restocks         int
	HistoryMaxOps    int

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
		Lock:             LockRedis,
		SoldOutBound:     DefaultSoldOutBound,
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
	if r.cfg.K6, err = toolchain.EnsureK6(ctx, cfg.K6, r.log); err != nil { // before any server starts
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
