// Package harness runs the flash-sale load test end to end: it brings up
// MariaDB, Redis and N service instances, creates a SKU, drives k6 at it
// (optionally killing Redis, an instance or MariaDB mid-sale), then checks
// from the database and the API that nothing was oversold, lost or doubled.
//
// Everything it starts it stops, however the run ends.
package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/orderid"
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
	Script     string   // sale.js; empty is loadtest/sale.js in the module
	ResultsDir string   // default loadtest/results in the module
	Keep       bool     // keep the database and the work directory
	Name       string   // run name in the results directory, default time + fault

	Log io.Writer // progress; nil discards

	// SoldOutBound is the only staleness of a sold_out answer the history
	// check accepts, default DefaultSoldOutBound (sold_out.local_ttl + sold_out.recheck).
	SoldOutBound time.Duration
	// Restocks is how many times the runner restocks the SKU during the
	// sale, each time it sells out, to a quarter of Stock; default 0.
	Restocks int
	// HistoryMaxOps bounds the operations the history check's search
	// takes; past it the check is not concluded. Zero: 40,000.
	HistoryMaxOps int

	moduleRoot string
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

// run is the state of one Run.
type run struct {
	cfg    Config
	log    io.Writer
	id     string
	dir    string // results
	work   string // binaries, data directories
	ps     procs
	client *http.Client

	token      string
	shopper    string         // the HS256 secret k6 signs buyers' tokens with
	orderIDs   *orderid.Codec // reads the ids buyers were told
	dbName     string
	serverDSN  string
	db         *sql.DB
	redis      []*proc
	redisAddrs []string
	sentinels  *sentinelSetup // with the failover fault on Sentinel
	cluster    *clusterSetup  // with the failover fault on Cluster
	zk         *zkEnsemble    // with -lock zookeeper
	mariadb    *proc
	myfail     *mysqlFailoverSetup // with the mysql-failover fault
	instances  []*proc
	baseURLs   []string
	skuID      int64   // the first of skuIDs
	skuIDs     []int64 // the sale's SKUs

	loadBefore string

	mu       sync.Mutex
	events   []event
	monitor  monitorState
	restocks restockLog
	locks    *LockInspection // the lock inspection sampler's findings
}

type event struct {
	At   time.Time
	What string
}

func (r *run) event(format string, args ...any) {
	e := event{At: time.Now(), What: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	fmt.Fprintf(r.log, "%s  %s\n", e.At.Format("15:04:05.000"), e.What)
}

// Run performs one load run and returns its summary. The error is for a
// run that could not be carried out (a server that would not start, k6
// missing); a run that found a violation returns a failing Result and a
// nil error.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	cfg, err = normalize(cfg)
	if err != nil {
		return res, err
	}
	r := &run{cfg: cfg, log: cfg.Log, client: &http.Client{Timeout: 30 * time.Second}}
	r.id = cfg.Name
	if r.id == "" {
		r.id = time.Now().Format("20060102-150405") + "-" + cfg.Fault
		if cfg.Target {
			r.id = time.Now().Format("20060102-150405") + "-target"
		}
	}
	r.dir = filepath.Join(cfg.ResultsDir, r.id)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return res, fmt.Errorf("results: %w", err)
	}
	res.Dir = r.dir
	if r.work, err = os.MkdirTemp("", "seckill-loadtest-"); err != nil {
		return res, err
	}
	defer func() {
		r.ps.stopAll(15 * time.Second)
		if r.db != nil {
			// A private MariaDB goes with its data directory.
			if r.dbName != "" && !cfg.Keep && r.mariadb == nil && r.myfail == nil {
				dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				if _, derr := r.db.ExecContext(dctx, "DROP DATABASE IF EXISTS "+r.dbName); derr != nil {
					fmt.Fprintf(r.log, "warning: drop database %s: %v\n", r.dbName, derr)
				}
				cancel()
			}
			r.db.Close()
		}
		r.myfail.stop()
		if cfg.Keep {
			fmt.Fprintf(r.log, "kept work directory %s and database %s\n", r.work, r.dbName)
		} else {
			os.RemoveAll(r.work)
		}
	}()

	k6, err := EnsureK6(ctx, cfg.K6, r.log)
	if err != nil {
		return res, err
	}
	if cfg.Target {
		r.baseURLs, r.token, r.shopper = cfg.BaseURLs, cfg.AdminToken, cfg.ShopperSecret
		if err := r.setOrderIDs(cfg.OrderIDKey); err != nil {
			return res, err
		}
	} else if err := r.bringUp(ctx); err != nil {
		return res, err
	}
	if err := r.createSKUs(ctx); err != nil {
		return res, err
	}
	if len(r.skuIDs) > 1 {
		r.event("%d skus created from %d: stock %d in all, per-user limit %d", len(r.skuIDs), r.skuID, cfg.Stock, cfg.PerUserLimit)
	} else {
		r.event("sku %d created: stock %d, per-user limit %d", r.skuID, cfg.Stock, cfg.PerUserLimit)
	}

	r.loadBefore = loadAverage()
	mctx, stopMonitor := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	k6Start := time.Now()
	go func() {
		defer wg.Done()
		r.watch(mctx, k6Start)
	}()
	r.locks = newLockInspection()
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.sampleLocks(mctx, r.locks)
	}()
	if cfg.Restocks > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.restockLoop(mctx)
		}()
	}
	k6res, k6err := r.runK6(ctx, k6)
	r.event("k6 finished: exit %d", k6res.ExitCode)
	r.saveMetrics(ctx)
	stopMonitor()
	wg.Wait()
	if k6err != nil {
		return res, k6err
	}
	if err := r.monitor.faultErr; err != nil {
		return res, fmt.Errorf("fault injection: %w", err)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
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
	if err := r.writeResults(sum); err != nil {
		return res, err
	}
	return res, nil
}

func normalize(cfg Config) (Config, error) {
	d := Default()
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setInt(&cfg.Instances, d.Instances)
	setInt(&cfg.StartRate, d.StartRate)
	setInt(&cfg.Rate, d.Rate)
	setInt(&cfg.MaxVUs, d.MaxVUs)
	setInt(&cfg.RedisServers, 1)
	setInt(&cfg.RedisKill, 1)
	if cfg.Stock == 0 {
		cfg.Stock = d.Stock
	}
	if cfg.PerUserLimit == 0 {
		cfg.PerUserLimit = d.PerUserLimit
	}
	for _, p := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.Ramp, d.Ramp}, {&cfg.Hold, d.Hold}, {&cfg.FaultFor, d.FaultFor}, {&cfg.UnavailableGrace, d.UnavailableGrace}} {
		if *p.v == 0 {
			*p.v = p.def
		}
	}
	if cfg.Fault == "" {
		cfg.Fault = FaultNone
	}
	if cfg.SKUs == 0 {
		cfg.SKUs = 1
		if cfg.Redis == RedisCluster {
			cfg.SKUs = DefaultClusterSKUs
		}
	}
	if cfg.Lock == "" {
		cfg.Lock = LockRedis
	}
	if cfg.P95 == 0 {
		cfg.P95 = 1500 * time.Millisecond
		if cfg.Fault != FaultNone {
			cfg.P95 = 3 * time.Second
		}
	}
	if cfg.P99 == 0 {
		cfg.P99 = 3 * time.Second
		if cfg.Fault != FaultNone {
			cfg.P99 = 6 * time.Second
		}
	}
	if cfg.SoldOutBound == 0 {
		cfg.SoldOutBound = DefaultSoldOutBound
	}
	if cfg.FaultAt == 0 {
		cfg.FaultAt = d.FaultAt
	}
	if cfg.MySQLDSN == "" {
		cfg.MySQLDSN = d.MySQLDSN
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	switch {
	case !contains(Faults, cfg.Fault):
		return cfg, fmt.Errorf("fault %q: want one of %s", cfg.Fault, strings.Join(Faults, ", "))
	case cfg.Instances < 1 || cfg.Instances > 16:
		return cfg, fmt.Errorf("instances %d: want 1 to 16", cfg.Instances)
	case cfg.Stock < 1:
		return cfg, fmt.Errorf("stock %d: want at least 1", cfg.Stock)
	case cfg.SKUs < 1 || cfg.SKUs > 1000 || int64(cfg.SKUs) > cfg.Stock:
		return cfg, fmt.Errorf("skus %d: want 1 to 1000, and no more than -stock (%d)", cfg.SKUs, cfg.Stock)
	case cfg.SKUs > 1 && (cfg.Target || cfg.Restocks > 0):
		return cfg, errors.New("-skus above 1 needs the runner's own database and no -restocks")
	case cfg.FaultAt < 0 || cfg.FaultAt >= 1:
		return cfg, fmt.Errorf("fault-at %v: want a share of the stock in [0, 1)", cfg.FaultAt)
	case cfg.Target && (len(cfg.BaseURLs) == 0 || len(cfg.AdminToken) < 16):
		return cfg, errors.New("target mode needs base URLs and the admin token (16+ characters)")
	case cfg.Target && cfg.Fault != FaultNone:
		return cfg, errors.New("target mode cannot inject faults into a deployment it did not start")
	case cfg.Redis != "" && cfg.Redis != RedisSentinel && cfg.Redis != RedisCluster:
		return cfg, fmt.Errorf("redis %q: want %s or %s", cfg.Redis, RedisSentinel, RedisCluster)
	case cfg.Redis != "" && cfg.Fault != FaultFailover && cfg.Fault != FaultNone:
		return cfg, errors.New("-redis sentinel|cluster is the failover fault's topology: use it with -fault failover (or none)")
	case cfg.Fault == FaultFailover && len(cfg.RedisAddrs) > 0:
		return cfg, errors.New("the failover fault starts its own master, replicas and sentinels: do not pass Redis addresses with it")
	case cfg.Fault == FaultRedis && len(cfg.RedisAddrs) > 0:
		return cfg, errors.New("the redis fault kills the runner's own redis-server: do not pass Redis addresses with it")
	case cfg.RedisServers < 1 || cfg.RedisServers > 7 || cfg.RedisKill < 1 || cfg.RedisKill > cfg.RedisServers:
		return cfg, fmt.Errorf("redis-servers %d, redis-kill %d: want 1 to 7 servers and 1 to all of them killed", cfg.RedisServers, cfg.RedisKill)
	case cfg.Fault == FaultMySQLFailover && (cfg.MySQLMinReplicas < 0 || cfg.MySQLMinReplicas > 2):
		return cfg, fmt.Errorf("mysql-min-replicas %d: the mysql-failover fault has 2 replicas: want 0 to 2", cfg.MySQLMinReplicas)
	case cfg.Fault == FaultInstance && cfg.Instances < 2:
		return cfg, errors.New("the instance fault needs at least 2 instances")
	}
	if err := validateLock(cfg); err != nil {
		return cfg, err
	}
	root, err := ModuleRoot(".")
	if err != nil && (cfg.Script == "" || cfg.ResultsDir == "" || (!cfg.Target && cfg.ServiceBin == "")) {
		return cfg, err
	}
	if cfg.Script == "" {
		cfg.Script = filepath.Join(root, "loadtest", "sale.js")
	}
	if cfg.ResultsDir == "" {
		cfg.ResultsDir = filepath.Join(root, "loadtest", "results")
	}
	cfg.moduleRoot = root
	return cfg, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// bringUp builds the service, makes sure MariaDB and Redis are up,
// creates and migrates the run's database and starts the instances.
func (r *run) bringUp(ctx context.Context) error {
	cfg := r.cfg
	bin := cfg.ServiceBin
	if bin == "" {
		r.event("building the service")
		var err error
		if bin, err = BuildService(ctx, cfg.moduleRoot, r.work); err != nil {
			return err
		}
	}

	r.serverDSN = cfg.MySQLDSN
	if cfg.Fault == FaultMySQLFailover {
		dsn, err := r.startMySQLFailover(ctx)
		if err != nil {
			return err
		}
		r.serverDSN = dsn
	} else if cfg.Fault == FaultMySQL {
		p, dsn, err := startMariaDB(ctx, &r.ps, r.work, r.log)
		if err != nil {
			return err
		}
		r.mariadb, r.serverDSN = p, dsn
	} else if err := ensureSharedMySQL(ctx, r.serverDSN, r.log); err != nil {
		return err
	}
	r.redisAddrs = cfg.RedisAddrs
	if cfg.Lock == LockZooKeeper {
		if err := r.startZooKeeper(ctx); err != nil {
			return err
		}
	} else if cfg.Redis == RedisCluster {
		if err := r.startCluster(ctx); err != nil {
			return err
		}
	} else if cfg.Fault == FaultFailover || cfg.Redis == RedisSentinel {
		if err := r.startSentinels(ctx); err != nil {
			return err
		}
	} else if len(r.redisAddrs) == 0 {
		for i := range cfg.RedisServers {
			p, addr, err := startRedis(ctx, &r.ps, r.work, i)
			if err != nil {
				return err
			}
			r.redis, r.redisAddrs = append(r.redis, p), append(r.redisAddrs, addr)
		}
	}

	mcfg, err := mysql.ParseDSN(r.serverDSN)
	if err != nil {
		return fmt.Errorf("mysql dsn: %w", err)
	}
	mcfg.DBName = ""
	if r.db, err = sql.Open("mysql", mcfg.FormatDSN()); err != nil {
		return err
	}
	r.db.SetMaxOpenConns(4)
	var maxConns int
	if err := r.db.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&maxConns); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	r.dbName = "seckill_lt_" + strings.ReplaceAll(r.id, "-", "_") + "_" + randomHex(3)
	if _, err := r.db.ExecContext(ctx, "CREATE DATABASE "+r.dbName); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	// The service gets the DSN as given; the verifier reads the run's
	// database through its own pool, with times parsed.
	mcfg.DBName = r.dbName
	runDSN := mcfg.FormatDSN()
	mcfg.ParseTime = true
	r.db.Close()
	if r.db, err = sql.Open("mysql", mcfg.FormatDSN()); err != nil {
		return err
	}
	r.db.SetMaxOpenConns(4)

	// Leave the server room for the verifier and everyone else.
	perInstance := min(64, max(4, (maxConns-30)/cfg.Instances))
	r.token = randomHex(16)
	// Buyers are verified (auth.shopper jwt, the default): k6 signs each
	// one's token with this secret; -env SECKILL_AUTH_SHOPPER=none still works.
	r.shopper = randomHex(32)
	orderIDKey := randomHex(16)
	if err := r.setOrderIDs(orderIDKey); err != nil {
		return err
	}
	env := append(os.Environ(),
		"SECKILL_AUTH_JWT_SECRET="+r.shopper,
		"SECKILL_AUTH_ORDER_ID_KEY="+orderIDKey,
		"SECKILL_MYSQL_DSN="+runDSN,
		"SECKILL_REDIS_ADDRS="+strings.Join(r.redisAddrs, ","),
		"SECKILL_ADMIN_TOKEN="+r.token,
		"SECKILL_LOG_LEVEL=warn",
		"SECKILL_LOCK_PREFIX=seckill:lt:"+r.id+":",
		"SECKILL_MYSQL_MAX_OPEN_CONNS="+strconv.Itoa(perInstance),
	)
	env = append(env, r.redisEnv()...)
	if r.zk != nil {
		env = append(env, r.zkEnv()...)
	}
	if r.myfail != nil {
		env = append(env, r.mysqlFailoverEnv()...)
	}
	env = append(env, cfg.Env...)

	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := runCmd(mctx, env, bin, "migrate", "up"); err != nil {
		return fmt.Errorf("seckill migrate up: %w\n%s", err, out)
	}
	r.event("database %s migrated", r.dbName)

	for i := range cfg.Instances {
		if err := r.startInstance(ctx, i, bin, env); err != nil {
			return err
		}
	}
	r.event("%d instance(s) ready: %s", len(r.baseURLs), strings.Join(r.baseURLs, " "))
	return nil
}

// startInstance starts instance i on a free port and waits until it is
// ready. A port taken between the kernel's offer and the bind is retried.
func (r *run) startInstance(ctx context.Context, i int, bin string, env []string) error {
	var err error
	for range 3 {
		var port int
		if port, err = FreePort(); err != nil {
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p := r.ps.add(&proc{
			name: fmt.Sprintf("instance-%d", i), path: bin, args: []string{"serve"},
			env: append(env[:len(env):len(env)], "SECKILL_HTTP_ADDR="+addr),
			log: filepath.Join(r.dir, fmt.Sprintf("instance-%d.log", i)),
		})
		if err = p.start(); err != nil {
			return err
		}
		if i < len(r.instances) {
			r.instances[i], r.baseURLs[i] = p, "http://"+addr
		} else {
			r.instances = append(r.instances, p)
			r.baseURLs = append(r.baseURLs, "http://"+addr)
		}
		if err = r.waitReady(ctx, i, r.baseURLs[i]); err == nil {
			return nil
		}
		if alive, _ := p.running(); alive {
			return err // up but not ready: not a port clash
		}
	}
	return err
}

func (r *run) waitReady(ctx context.Context, i int, base string) error {
	return poll(ctx, fmt.Sprintf("instance-%d (%s)", i, base), 60*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		if alive, err := r.instances[i].running(); !alive {
			return fmt.Errorf("instance-%d exited: %v (see %s): %w", i, err, r.instances[i].log, errGaveUp)
		}
		return httpOK(r.client, base+"/readyz")(ctx)
	})
}

// checkAlive reports the instances that died without being killed by the
// fault (the victim was restarted, so it is alive again).
func (r *run) checkAlive() error {
	var dead []string
	for _, p := range r.instances {
		if alive, err := p.running(); !alive {
			dead = append(dead, fmt.Sprintf("%s exited during the run: %v (see %s)", p.name, err, p.log))
		}
	}
	if len(dead) == 0 {
		return nil
	}
	return errors.New(strings.Join(dead, "; "))
}

func runCmd(ctx context.Context, env []string, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	return cmd.CombinedOutput()
}

// createSKU creates one SKU of the sale through the admin API.
func (r *run) createSKU(ctx context.Context, stock int64) (int64, error) {
	body, _ := json.Marshal(map[string]any{
		"name": "loadtest " + r.id, "stock": stock, "per_user_limit": r.cfg.PerUserLimit,
	})
	var out struct {
		ID int64 `json:"id"`
	}
	if err := r.admin(ctx, http.MethodPost, r.baseURLs[0]+"/admin/v1/skus", body, http.StatusCreated, &out); err != nil {
		return 0, fmt.Errorf("create sku: %w", err)
	}
	if out.ID == 0 {
		return 0, errors.New("create sku: the answer has no id")
	}
	return out.ID, nil
}

func (r *run) admin(ctx context.Context, method, url string, body []byte, want int, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(raw)))
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// redisEnv is the Redis part of the instances' environment: one server,
// Redlock over several, or the sentinels of the failover fault.
func (r *run) redisEnv() []string {
	switch {
	case r.sentinels != nil:
		return []string{"SECKILL_REDIS_MODE=sentinel", "SECKILL_REDIS_MASTER_NAME=" + sentinelMaster}
	case r.cluster != nil:
		return []string{"SECKILL_REDIS_MODE=cluster"}
	case len(r.redisAddrs) > 1:
		return []string{"SECKILL_REDIS_MODE=redlock"}
	default:
		return []string{"SECKILL_REDIS_MODE=standalone"}
	}
}

// setOrderIDs keeps the codec of the service's order ids; a target
// without a key cannot have its acknowledgements checked.
func (r *run) setOrderIDs(hexKey string) error {
	if hexKey == "" {
		return errors.New("the service's order id key (auth.order_id_key) is required to check acknowledged orders")
	}
	key, err := orderid.ParseKey(hexKey)
	if err != nil {
		return err
	}
	r.orderIDs, err = orderid.New(key)
	return err
}
