package harness

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
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
	"github.com/seckill/seckill/internal/testenv/mariadb"
	"github.com/seckill/seckill/internal/testenv/natsserver"
	"github.com/seckill/seckill/internal/toolchain"
	"github.com/seckill/seckill/lock/locktest"
	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

// run is the state of one run, the k6 sale's or a scenario's.
type run struct {
	cfg    Config
	log    io.Writer
	id     string
	dir    string              // results
	work   string              // binaries, data directories
	procs  []*locktest.Process // the instances and k6, killed first
	client *http.Client

	token      string
	payToken   string         // the payment system's (auth.payment_tokens)
	shopper    string         // the HS256 secret k6 signs buyers' tokens with
	orderIDs   *orderid.Codec // reads the ids buyers were told
	dbName     string
	serverDSN  string
	db         *sql.DB
	stops      []func() // stop the servers the run started, last first
	redis      []*locktest.RedisProc
	redisAddrs []string
	sentinels  *locktest.SentinelGroup // with the failover fault on Sentinel
	cluster    *locktest.Cluster       // with the failover fault on Cluster
	zk         *zktest.ZooKeeper       // with -lock zookeeper
	mariadb    *mariadb.Server         // with the mysql fault
	myfail     *mysqlFailoverSetup     // with the mysql-failover fault
	nats       *natsserver.Server      // with -events
	instances  []*locktest.Process
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

// newRun makes the run's results directory, loadtest/results/<id>, and
// its work directory. The caller defers tearDown at once, whatever the
// error: what was started is stopped.
func newRun(cfg Config, id string, client *http.Client) (*run, error) {
	r := &run{cfg: cfg, log: cfg.Log, id: id, client: client}
	r.dir = filepath.Join(cfg.resultsDir(), r.id)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return r, fmt.Errorf("results: %w", err)
	}
	var err error
	r.work, err = os.MkdirTemp("", "seckill-loadtest-")
	return r, err
}

// tearDown stops what the run started, drops its database (a private
// MariaDB goes with its data directory) and removes the work directory,
// unless Keep.
func (r *run) tearDown() {
	for _, p := range r.procs {
		p.Kill()
	}
	if r.db != nil {
		if r.dbName != "" && !r.cfg.Keep && r.mariadb == nil && r.myfail == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if _, err := r.db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+r.dbName); err != nil {
				fmt.Fprintf(r.log, "warning: drop database %s: %v\n", r.dbName, err)
			}
			cancel()
		}
		r.db.Close()
	}
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
	if r.cfg.Keep {
		fmt.Fprintf(r.log, "kept work directory %s and database %s\n", r.work, r.dbName)
	} else if r.work != "" {
		os.RemoveAll(r.work)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// bringUp builds the service, makes sure MariaDB and the lock's store are
// up, creates and migrates the run's database and starts the instances.
func (r *run) bringUp(ctx context.Context) error {
	bin, err := r.serviceBinary(ctx)
	if err != nil {
		return err
	}
	if err := r.startDatabase(ctx); err != nil {
		return err
	}
	if err := r.startLockStore(ctx); err != nil {
		return err
	}
	if r.cfg.Events {
		if err := r.startNATS(ctx); err != nil {
			return err
		}
	}
	runDSN, maxConns, err := r.createDatabase(ctx)
	if err != nil {
		return err
	}
	env, err := r.instanceEnv(runDSN, maxConns)
	if err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	migrate := exec.CommandContext(mctx, bin, "migrate", "up")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		return fmt.Errorf("seckill migrate up: %w\n%s", err, out)
	}
	r.event("database %s migrated", r.dbName)
	for i := range r.cfg.Instances {
		if err := r.startInstance(ctx, i, bin, env); err != nil {
			return err
		}
	}
	r.event("%d instance(s) ready: %s", len(r.baseURLs), strings.Join(r.baseURLs, " "))
	return nil
}

// serviceBinary is -bin, or ./cmd/seckill built into the work directory.
func (r *run) serviceBinary(ctx context.Context) (string, error) {
	if r.cfg.ServiceBin != "" {
		return r.cfg.ServiceBin, nil
	}
	r.event("building the service")
	return toolchain.BuildService(ctx, r.cfg.moduleRoot, r.work)
}

// startDatabase sets the server the run's database goes on: a private
// primary and replicas (mysql-failover), a private mariadbd (mysql), or
// the shared server, started if it is local and down.
func (r *run) startDatabase(ctx context.Context) error {
	r.serverDSN = r.cfg.MySQLDSN
	switch r.cfg.Fault {
	case FaultMySQLFailover:
		dsn, err := r.startMySQLFailover(ctx)
		r.serverDSN = dsn
		return err
	case FaultMySQL:
		return r.startMariaDB(ctx)
	}
	return mariadb.EnsureLocal(ctx, r.serverDSN, r.log)
}

// startMariaDB starts a private mariadbd, so that killing it disrupts
// nobody else.
func (r *run) startMariaDB(ctx context.Context) error {
	fmt.Fprintln(r.log, "installing a private MariaDB for the restart fault")
	dir := filepath.Join(r.work, "mariadb")
	template, err := mariadb.Template(ctx, dir)
	if err != nil {
		return err
	}
	s, err := mariadb.Start(ctx, template, filepath.Join(dir, "s1"), 1, "--max-connections=1000", "--innodb-buffer-pool-size=256M")
	if err != nil {
		return err
	}
	r.stops = append(r.stops, s.Kill)
	r.mariadb, r.serverDSN = s, s.RootDSN()
	return nil
}

// startLockStore starts what the instances lock on: a ZooKeeper ensemble,
// a Redis Cluster or Sentinel group, or private redis-servers (none with
// -redis-addrs).
func (r *run) startLockStore(ctx context.Context) error {
	cfg := r.cfg
	r.redisAddrs = cfg.RedisAddrs
	switch {
	case cfg.Lock == LockZooKeeper:
		return r.startZooKeeper(ctx)
	case cfg.Redis == RedisCluster:
		return r.startCluster(ctx)
	case cfg.Fault == FaultFailover || cfg.Redis == RedisSentinel:
		return r.startSentinels(ctx)
	case len(r.redisAddrs) > 0:
		return nil
	}
	for range cfg.RedisServers {
		p, err := locktest.StartRedis(ctx, r.work)
		if err != nil {
			return err
		}
		r.stops = append(r.stops, p.Kill)
		r.redis, r.redisAddrs = append(r.redis, p), append(r.redisAddrs, p.Addr)
	}
	return nil
}

// createDatabase creates the run's database on the server and opens the
// verifier's pool on it (times parsed); it returns the service's DSN of
// it, as given, and the server's max_connections.
func (r *run) createDatabase(ctx context.Context) (runDSN string, maxConns int, err error) {
	r.dbName = "seckill_lt_" + strings.ReplaceAll(r.id, "-", "_") + "_" + randomHex(3)
	if runDSN, err = mariadb.CreateDatabase(ctx, r.serverDSN, r.dbName); err != nil {
		return "", 0, err
	}
	mcfg, err := mysql.ParseDSN(runDSN)
	if err != nil {
		return "", 0, err
	}
	mcfg.ParseTime = true
	if r.db, err = sql.Open("mysql", mcfg.FormatDSN()); err != nil {
		return "", 0, err
	}
	r.db.SetMaxOpenConns(4)
	err = r.db.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&maxConns)
	return runDSN, maxConns, err
}

// instanceEnv is every instance's environment: the run's database, lock
// store, admin token and the secrets it generates, then -env.
func (r *run) instanceEnv(runDSN string, maxConns int) ([]string, error) {
	// Leave the server room for the verifier and everyone else.
	perInstance := min(64, max(4, (maxConns-30)/r.cfg.Instances))
	r.token, r.payToken = randomHex(16), randomHex(16)
	// Buyers are verified (auth.shopper jwt, the default): k6 signs each
	// one's token with this secret; -env SECKILL_AUTH_SHOPPER=none still works.
	r.shopper = randomHex(32)
	orderIDKey := randomHex(16)
	if err := r.setOrderIDs(orderIDKey); err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"SECKILL_AUTH_JWT_SECRET="+r.shopper,
		"SECKILL_AUTH_ORDER_ID_KEY="+orderIDKey,
		"SECKILL_MYSQL_DSN="+runDSN,
		"SECKILL_REDIS_ADDRS="+strings.Join(r.redisAddrs, ","),
		"SECKILL_REDIS_MODE="+r.redisMode(),
		"SECKILL_ADMIN_TOKEN="+r.token,
		"SECKILL_AUTH_PAYMENT_TOKENS="+r.payToken,
		"SECKILL_LOG_LEVEL=warn",
		"SECKILL_LOCK_PREFIX=seckill:lt:"+r.id+":",
		"SECKILL_MYSQL_MAX_OPEN_CONNS="+strconv.Itoa(perInstance),
	)
	if r.sentinels != nil {
		env = append(env, "SECKILL_REDIS_MASTER_NAME="+sentinelMaster)
	}
	if r.zk != nil {
		env = append(env, r.zkEnv()...)
	}
	if r.myfail != nil {
		env = append(env, r.mysqlFailoverEnv()...)
	}
	if r.nats != nil {
		env = append(env, r.nats.Env()...)
	}
	return append(env, r.cfg.Env...), nil
}

// instanceReady bounds the wait for an instance to answer /readyz.
const instanceReady = time.Minute

// startInstance starts instance i on a free port and waits until it is
// ready. A port taken between the kernel's offer and the bind (the
// instance exits) is retried.
func (r *run) startInstance(ctx context.Context, i int, bin string, env []string) error {
	var err error
	for range 3 {
		var port int
		if port, err = locktest.FreePort(); err != nil {
			return err
		}
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		p := &locktest.Process{Path: bin, Args: []string{"serve"}, Ready: r.ready(base),
			Env: append(env[:len(env):len(env)], "SECKILL_HTTP_ADDR="+strings.TrimPrefix(base, "http://")),
			Log: filepath.Join(r.dir, instanceName(i)+".log")}
		r.procs = append(r.procs, p)
		if i < len(r.instances) {
			r.instances[i], r.baseURLs[i] = p, base
		} else {
			r.instances, r.baseURLs = append(r.instances, p), append(r.baseURLs, base)
		}
		if err = p.Start(ctx, instanceReady); !errors.Is(err, locktest.ErrExited) {
			return err
		}
	}
	return err
}

// ready answers nil once the instance at base is ready.
func (r *run) ready(base string) func(context.Context) error {
	return func(ctx context.Context) error {
		p, err := r.send(ctx, http.MethodGet, base+"/readyz", "", "")
		if err == nil && p.status != http.StatusOK {
			err = fmt.Errorf("GET %s/readyz: %d", base, p.status)
		}
		return err
	}
}

func instanceName(i int) string { return fmt.Sprintf("instance-%d", i) }

// checkAlive reports the instances that died without being killed by the
// fault (the victim was restarted, so it is alive again).
func (r *run) checkAlive() error {
	var dead []string
	for i, p := range r.instances {
		if !p.Alive() {
			dead = append(dead, fmt.Sprintf("%s exited during the run: %v (see %s)", instanceName(i), p.Wait(context.Background()), p.Log))
		}
	}
	if len(dead) == 0 {
		return nil
	}
	return errors.New(strings.Join(dead, "; "))
}

// redisMode is the instances' SECKILL_REDIS_MODE: one server, Redlock
// over several, or the failover fault's sentinels or cluster.
func (r *run) redisMode() string {
	switch {
	case r.sentinels != nil:
		return "sentinel"
	case r.cluster != nil:
		return "cluster"
	case len(r.redisAddrs) > 1:
		return "redlock"
	}
	return "standalone"
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
