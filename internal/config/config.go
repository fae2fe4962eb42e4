// Package config loads the service's one typed Config: defaults, then an
// optional YAML file, then SECKILL_* environment variables, then validation.
// An invalid value fails start-up with a message that names its key.
//
// Each setting is declared once, by its field's tags (settings.go), which
// give its default, variable, help line and simple bounds; adding one is
// one field, a line in configs/seckill.yaml and go generate for the docs.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is everything the service can be told. The zero value is not
// useful: start from Default.
type Config struct {
	HTTP    HTTP    `yaml:"http"`
	MySQL   MySQL   `yaml:"mysql"`
	Redis   Redis   `yaml:"redis"`
	Admin   Admin   `yaml:"admin"`
	Order   Order   `yaml:"order"`
	Lock    Lock    `yaml:"lock"`
	SoldOut SoldOut `yaml:"sold_out"`
	Log     Log     `yaml:"log"`
	Limits  Limits  `yaml:"limits"`

	ZooKeeper ZooKeeper `yaml:"zookeeper"`
	Auth      Auth      `yaml:"auth"`
	Events    Events    `yaml:"events"`

	// Tracing is read from the standard OTEL_* variables, not the file
	// (tracing.go).
	Tracing Tracing `yaml:"-"`
}

// Limits are the rate limits; a zero rate turns one off. The defaults
// never throttle the project's own load tests, whose buyers send a few
// requests each and all come from 127.0.0.1.
type Limits struct {
	PerUserRate    float64  `yaml:"per_user_rate" default:"20" valid:">=0" help:"order requests/s per user_id; 0 off"`
	PerUserBurst   int      `yaml:"per_user_burst" default:"40" valid:">0" help:"burst of the per-user limit"`
	PerIPRate      float64  `yaml:"per_ip_rate" default:"0" valid:">=0" help:"requests/s per client IP on /api; 0 off (load tests share 127.0.0.1)"`
	PerIPBurst     int      `yaml:"per_ip_burst" default:"200" valid:">0" help:"burst of the per-IP limit"`
	MaxKeys        int      `yaml:"max_keys" default:"100000" valid:">0" help:"users or IPs tracked; beyond it a new key takes the slot of one not asked again lately (CLOCK: a key still in use keeps its bucket)"`
	TrustedProxies []string `yaml:"trusted_proxies" help:"IPs or CIDRs allowed to set X-Forwarded-For; none: the client IP is the connection's"`
}

// HTTP configures the listener and its protective limits.
type HTTP struct {
	Addr              string        `yaml:"addr" default:"127.0.0.1:8080" help:"listen address of the API (and of /metrics)"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" default:"5s" valid:">0" help:"longest wait for a request's headers"`
	ReadTimeout       time.Duration `yaml:"read_timeout" default:"10s" valid:">0" help:"longest wait for a whole request"`
	WriteTimeout      time.Duration `yaml:"write_timeout" default:"30s" valid:">0" help:"longest time to write a response"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" default:"120s" valid:">0" help:"an idle keep-alive connection is closed after it"`
	ShutdownTimeout   time.Duration `yaml:"shutdown_timeout" default:"20s" valid:">0" help:"graceful shutdown bound: queues are drained or answered within it"`
	// DrainDelay lets a load balancer stop sending before the listener
	// closes (set ~5s behind one).
	DrainDelay   time.Duration `yaml:"drain_delay" default:"0s" valid:">=0" help:"/readyz answers 503 draining this long after SIGTERM before the listener closes"`
	MaxBodyBytes int64         `yaml:"max_body_bytes" default:"4096" valid:">0" help:"larger request bodies get 413"`
	// AdminAddr keeps the operator's routes off the public API listener.
	AdminAddr string `yaml:"admin_addr" valid:"addr" help:"serve /admin, /internal and /metrics on this listener alone, the API's answering them 404 (pprof too when debug_addr is the same address); none: all on the API listener"`
	DebugAddr string `yaml:"debug_addr" env:"SECKILL_DEBUG_ADDR" valid:"addr" help:"serve net/http/pprof there (loopback only); none: off"`
	// ReadyCache bounds what the public, unthrottled probe costs the
	// database and Redis whatever its callers do.
	ReadyCache time.Duration `yaml:"ready_cache" default:"1s" valid:">=0" help:"/readyz asks MySQL and Redis once per this period at most"`
	// BenchEndpoints is the HTTP ceiling `make bench` measures against.
	BenchEndpoints bool `yaml:"bench_endpoints" env:"SECKILL_BENCH_ENDPOINTS" default:"false" help:"mount POST /bench/constant, which answers a constant order; never in production"`
}

// MySQL configures the source of truth. An empty DSN selects the embedded
// SQLite store of the quick start.
type MySQL struct {
	DSN          string        `yaml:"dsn" secret:"true" help:"go-sql-driver DSN, e.g. user:pass@tcp(127.0.0.1:3306)/seckill; none: the embedded SQLite (quick start only)"`
	MaxOpenConns int           `yaml:"max_open_conns" default:"24" valid:">0" help:"connections per instance; instances × this ≤ the server's max_connections (151 by default)"`
	MaxIdleConns int           `yaml:"max_idle_conns" default:"24" valid:">=0" help:"idle connections kept per instance"`
	ConnMaxLife  time.Duration `yaml:"conn_max_life" default:"5m" help:"a connection is closed after this long"`
	// IOTimeout is the backstop of statements no context bounds (an admin
	// transaction's COMMIT); it outlasts innodb_lock_wait_timeout (50s) so
	// that a lock wait ends with the server's own error. Migrations run
	// without it.
	IOTimeout time.Duration `yaml:"io_timeout" default:"60s" valid:">0" help:"bounds each read and write of a database connection"`
	// MinReplicas > 0: an order is acknowledged only once that many of
	// Replicas have its commit (docs/locking.md, the MariaDB failover).
	MinReplicas    int           `yaml:"min_replicas" default:"0" valid:">=0" help:"acknowledge orders only once this many of mysql.replicas have their commit (MASTER_GTID_WAIT); fewer in time: 503 outcome_unknown; 0: at COMMIT"`
	Replicas       []string      `yaml:"replicas" secret:"true" help:"DSNs of the primary's replicas (GTID replication, log_slave_updates), comma-separated; never logged"`
	ReplicaTimeout time.Duration `yaml:"replica_timeout" default:"1s" valid:"1ms..1m" help:"longest wait for mysql.min_replicas replicas to confirm a commit; also bounds a replica that is down"`
}

// Redis configures the lock and the shared sold-out marks. No address
// selects the embedded in-process Redis of the quick start. Mode says what
// the addresses are (see RedisModes); more than one address needs a mode.
type Redis struct {
	Mode        string        `yaml:"mode" valid:"|standalone|sentinel|cluster|redlock" help:"what redis.addrs are; none: standalone, for one address only"`
	Addrs       []string      `yaml:"addrs" valid:"addr" help:"host:port list; more than one needs SECKILL_REDIS_MODE (sentinel: the sentinels, cluster: seed nodes, redlock: independent masters); none: the embedded Redis"`
	Username    string        `yaml:"username" help:"ACL user of the Redis nodes, every mode"`
	Password    string        `yaml:"password" secret:"true" help:"password of the Redis nodes, every mode; never logged"`
	DB          int           `yaml:"db" default:"0" help:"database number; 0 with cluster"`
	DialTimeout time.Duration `yaml:"dial_timeout" default:"200ms" valid:">0" help:"connect timeout"`
	IOTimeout   time.Duration `yaml:"io_timeout" default:"200ms" valid:">0" help:"read and write timeout of one command"`
	PoolSize    int           `yaml:"pool_size" default:"64" valid:">0" help:"connections per node per instance"`
	// The sentinels name the master.
	MasterName       string   `yaml:"master_name" help:"the master's name, sentinel mode only (required there)"`
	SentinelUsername string   `yaml:"sentinel_username" help:"ACL user of the sentinels, sentinel mode only"`
	SentinelPassword string   `yaml:"sentinel_password" secret:"true" help:"password of the sentinels, sentinel mode only; never logged"`
	TLS              RedisTLS `yaml:"tls"`
}

// RedisTLS turns on TLS to every Redis node (and sentinel).
type RedisTLS struct {
	Enabled    bool   `yaml:"enabled" env:"SECKILL_REDIS_TLS" default:"false" help:"TLS to every node and sentinel"`
	CAFile     string `yaml:"ca_file" help:"PEM roots; none: the system's"`
	ServerName string `yaml:"server_name" help:"name the certificates must hold; none: each address's host"`
}

// Admin configures the admin API. An empty token is generated at start
// (quick start only: with a MySQL DSN the token is required).
type Admin struct {
	Token string `yaml:"token" secret:"true" help:"admin bearer token(s), at least 16 characters each; a comma-separated list rotates; required with a DSN"`
}

// Order configures the order path.
type Order struct {
	QueueMax       int           `yaml:"queue_max" default:"10000" valid:">0" help:"waiting buyers per SKU per instance; beyond: 429 busy"`
	BatchMax       int           `yaml:"batch_max" default:"256" valid:"1..10000" help:"orders per transaction (per lock hold)"`
	RequestTimeout time.Duration `yaml:"request_timeout" default:"10s" valid:">=10ms" help:"a buyer's total wait; then 503, uncharged"`
	TxTimeout      time.Duration `yaml:"tx_timeout" default:"5s" valid:">=10ms" help:"one batch: lock wait and transaction"`
	MaxRetries     int           `yaml:"max_retries" default:"50" valid:">0" help:"version and fence conflicts tolerated per batch"`
	IdleTimeout    time.Duration `yaml:"idle_timeout" default:"5s" valid:">0" help:"an idle SKU worker exits after it"`
	// MaxLiveSKUs bounds the SKU queues (each with its worker) of one
	// process. A full table evicts an idle queue (first one whose last
	// batch sold nothing); when every queue has work, an order for one
	// more SKU is answered 429 busy.
	MaxLiveSKUs int `yaml:"max_live_skus" default:"1024" valid:">0" help:"SKU queues (one worker each) per instance; full: an idle one is evicted, else 429 busy"`
	// UnknownSKUTTL: a SKU created through another instance becomes
	// sellable here within it (through this one, at once).
	UnknownSKUTTL time.Duration `yaml:"unknown_sku_ttl" default:"1s" valid:">0" help:"an id found not to exist is answered 404 without a database read this long"`
	// Linger is how long a SKU's worker waits for more orders before a
	// commit, only when more orders than its batch holds are expected to
	// arrive within it (engine/linger.go): a moderate rate then shares a
	// transaction instead of paying one per order. An idle or a saturated
	// SKU commits at once. A group-commit round waits as long for other
	// SKUs' batches, only when those expected would at least double it
	// (engine/rounds.go). The latency traded is at most Linger per
	// order at each step (docs/performance.md); it is bounded because
	// every lingering buyer pays it.
	Linger time.Duration `yaml:"linger" default:"5ms" valid:"0s..100ms" help:"longest wait for more orders, or other SKUs' batches, before a small commit; 0 off"`
	// PaymentTimeout: 0 pays an order at creation (see lifecycle.go).
	PaymentTimeout time.Duration `yaml:"payment_timeout" default:"15m" valid:">=0" help:"a new order stays pending, holding its units, this long, then expires unpaid; 0: paid at creation"`
	SweepInterval  time.Duration `yaml:"sweep_interval" default:"1s" valid:">=10ms" help:"how often the elected sweeper expires due orders"`
	SweepBatch     int           `yaml:"sweep_batch" default:"256" valid:"1..10000" help:"orders expired per transaction"`
	// FairWindow: a SKU's lock holder sells its turn's 64 oldest buyers,
	// then those who arrived no later than the oldest buyer waiting on
	// another instance plus this, then hands the lock to that instance
	// (engine/fair.go). Smaller is fairer down to the span of those 64
	// arrivals; handoffs stay at most one per 64 orders at any value.
	FairWindow time.Duration `yaml:"fair_window" default:"50ms" valid:"0s..10s" help:"first come, first served across instances: after its turn's 64 oldest buyers, a lock holder sells buyers up to this much younger than another instance's oldest, then hands over"`
	PlaceGrace time.Duration `yaml:"place_grace" default:"5s" valid:"0s..1m" help:"a buyer told 429/503 who retries with the same Idempotency-Key and body within Retry-After plus this keeps its first arrival, on any instance; 0: a place lapses with its Retry-After, and holds nobody up after"`
	// PlacesMax's ceiling keeps the table's arithmetic (2×max) and its
	// memory sane.
	PlacesMax int `yaml:"places_max" default:"50000" valid:"0..1000000" help:"places of buyers told to come back remembered per instance, the other instances' included (250 to 550 bytes each: docs/operations.md); full: the soonest to lapse goes; 0: none kept"`
	// WaitlistMax costs no memory: a waiter is a row of orders and of
	// user_purchases (about 300 bytes of disk with their indexes), counted
	// on its SKU's row. It also bounds the rows a returning transaction
	// may pass over (waiters bigger than what came back) on its way down
	// the line.
	WaitlistMax int `yaml:"waitlist_max" default:"10000" valid:"0..1000000" help:"waiting orders (\"wait\": true) per SKU, each a database row of about 300 bytes and no memory; past it 409 waitlist_full; 0: nobody waits"`
	// LongPollsMax: a held poll is its request's goroutine, a timer and
	// its connection's buffers, about 20 KiB (the default: about 40 MiB);
	// the instance has one Redis subscription whatever the polls.
	LongPollsMax int `yaml:"long_polls_max" default:"2000" valid:"0..100000" help:"GET /api/v1/orders/{id} held waiting for a change (Prefer: wait) per instance, about 20 KiB each; past it 503 unavailable + Retry-After; 0: no wait is applied"`
	// LongPollRecheck is the fallback for a lost change message (Redis
	// down, a publisher dead after its COMMIT): one read of every held
	// order, by primary key, 1000 ids a statement, per interval per
	// instance, and only while polls are held.
	LongPollRecheck time.Duration `yaml:"long_poll_recheck" default:"1s" valid:"100ms..10s" help:"each held long-poll's order is read again this often, in one batched read per instance: a change whose Redis message was lost is heard within it"`
}

// Lock configures the per-SKU Redis lock.
type Lock struct {
	Prefix string        `yaml:"prefix" default:"seckill:lock:" help:"Redis key prefix of locks, fence counters and sold-out marks; no { or }"`
	TTL    time.Duration `yaml:"ttl" default:"3s" valid:">0" help:"the lease, renewed by the watchdog while held; a dead holder's lock frees itself this fast"`
	// Wait: live holders are waited for up to order.tx_timeout/2.
	Wait     time.Duration `yaml:"wait" default:"1s" valid:">0" help:"longest wait for a lock whose holder shows no sign of life before selling on the database guard alone"`
	QueueMax int           `yaml:"queue_max" default:"1024" valid:">0" help:"local waiters per key per instance"`
	Watchdog bool          `yaml:"watchdog" default:"true" help:"renew the lease at ttl/3 while held; off: hold_max + order.tx_timeout must be shorter than ttl"`
	// WantedNotices: a holder lets a wanted lock go at once instead of at
	// its next hold_max.
	WantedNotices bool          `yaml:"wanted_notices" default:"true" help:"a refused acquisition publishes the key on <prefix>wanted (an ACL user needs &<prefix>wanted)"`
	HoldMax       time.Duration `yaml:"hold_max" default:"50ms" valid:">=0" help:"a busy SKU worker keeps its lock across batches this long; 0: one hold per batch"`
	HoldIdle      time.Duration `yaml:"hold_idle" default:"1s" valid:">=0" help:"a worker whose queue emptied keeps its lock this long for the next order; 0: lets it go at once"`
	Backend       string        `yaml:"backend" default:"redis" valid:"redis|zookeeper" help:"zookeeper: locks and sold-out marks in ZooKeeper, no Redis at all"`
	// MinReplicas > 0 makes every acquisition WAIT for that many replicas
	// to acknowledge it within ReplicaTimeout, else it is released and not
	// obtained (the order then sells on the database's guard).
	MinReplicas    int           `yaml:"min_replicas" default:"0" valid:">=0" help:"after acquiring, WAIT for this many replicas; fewer in time: not obtained (not with redlock)"`
	ReplicaTimeout time.Duration `yaml:"replica_timeout" default:"100ms" help:"that WAIT's bound; shorter than redis.io_timeout"`
}

// SoldOut configures the sold-out fast path.
type SoldOut struct {
	LocalTTL  time.Duration `yaml:"local_ttl" default:"500ms" valid:">0" help:"how long a local mark is trusted before the shared one is read again"`
	SharedTTL time.Duration `yaml:"shared_ttl" default:"10m" valid:">0" help:"lifetime of the shared mark in Redis or ZooKeeper"`
	// Recheck: a restock made through another instance is seen within
	// LocalTTL + Recheck, whatever Redis does.
	Recheck time.Duration `yaml:"recheck" default:"1s" valid:">0" help:"a local sold-out older than this is read again from the database; the read starts ahead, in the background, at half of it (at most two reads per SKU per instance per recheck)"`
}

// Log configures log/slog.
type Log struct {
	Level  string `yaml:"level" default:"info" valid:"debug|info|warn|error" help:"log/slog level"`
	Format string `yaml:"format" valid:"|json|text" help:"none: json, text in the quick start"`
	Access bool   `yaml:"access" default:"true" help:"one info line per HTTP request (method, route, status, latency, request ID, bytes)"`
}

// Default returns the defaults the tags declare.
func Default() Config { return defaults() }

// Load builds the Config: defaults, the YAML file at path (if path is not
// empty), then environment overrides read through getenv, then Validate.
func Load(path string, getenv func(string) string) (Config, error) {
	cfg := Default()
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
			return Config{}, fmt.Errorf("config %s: %w", path, explainYAML(raw, err))
		}
	}
	if err := cfg.applyEnv(getenv); err != nil {
		return Config{}, err
	}
	tracing, err := tracingFromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	cfg.Tracing = tracing
	return cfg, cfg.Validate()
}

// Embedded reports whether the quick start's in-process stores are used.
func (c Config) Embedded() bool { return c.MySQL.DSN == "" }

// ValidateServe adds to Validate what serving needs beyond migrating:
// with a real database, a real Redis and an admin token.
func (c Config) ValidateServe() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.MySQL.DSN != "" && len(c.Redis.Addrs) == 0 && c.Lock.Backend != BackendZooKeeper {
		return errors.New("config: redis.addrs (SECKILL_REDIS_ADDRS) is required with mysql.dsn: the embedded Redis is for the quick start only")
	}
	if c.MySQL.DSN != "" && c.Admin.Token == "" {
		return errors.New("config: admin.token (SECKILL_ADMIN_TOKEN) is required with mysql.dsn")
	}
	if c.MySQL.DSN != "" {
		return c.Auth.validateServe()
	}
	return nil
}

// Validate reports the first invalid setting, naming its key.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
		return fmt.Errorf("config: http.addr (SECKILL_HTTP_ADDR) %q: %v", c.HTTP.Addr, err)
	}
	if err := c.validateTags(); err != nil {
		return err
	}
	if c.HTTP.AdminAddr != "" && c.HTTP.AdminAddr == c.HTTP.Addr {
		return fmt.Errorf("config: http.admin_addr (SECKILL_HTTP_ADMIN_ADDR) %q is http.addr: leave it empty to serve /admin, /internal and /metrics on the API listener", c.HTTP.AdminAddr)
	}
	if c.Lock.HoldMax >= c.Lock.TTL {
		return errors.New("config: lock.hold_max must be shorter than lock.ttl")
	}
	for _, p := range c.Limits.TrustedProxies {
		if net.ParseIP(p) == nil {
			if _, _, err := net.ParseCIDR(p); err != nil {
				return fmt.Errorf("config: limits.trusted_proxies %q: not an IP or CIDR", p)
			}
		}
	}
	if !c.Lock.Watchdog && c.Lock.HoldMax+c.Order.TxTimeout >= c.Lock.TTL {
		// A worker may start a batch just before its hold ends and run it
		// for a whole tx_timeout: the lease must outlive both.
		return fmt.Errorf("config: lock.hold_max (%v) + order.tx_timeout (%v) must be shorter than lock.ttl (%v) unless lock.watchdog is on",
			c.Lock.HoldMax, c.Order.TxTimeout, c.Lock.TTL)
	}
	if c.Order.RequestTimeout >= c.HTTP.WriteTimeout {
		// The answer at a buyer's deadline (a 503, or an outcome_unknown
		// after waiting for the replicas) is written after it: a write
		// deadline before it would drop the connection instead.
		return fmt.Errorf("config: order.request_timeout (%v) must be shorter than http.write_timeout (%v): the answer at the deadline is written after it",
			c.Order.RequestTimeout, c.HTTP.WriteTimeout)
	}
	if c.Lock.Prefix == "" {
		return errors.New("config: lock.prefix must not be empty")
	}
	if err := c.validateZooKeeper(); err != nil {
		return err
	}
	if err := c.validateLifecycle(); err != nil {
		return err
	}
	if err := c.validateEvents(); err != nil {
		return err
	}
	if err := c.validateReplicas(); err != nil {
		return err
	}
	if err := c.validateRedis(); err != nil {
		return err
	}
	if err := c.Admin.validate(); err != nil {
		return err
	}
	if err := c.Auth.validate(); err != nil {
		return err
	}
	return nil
}

// Redis modes: what redis.addrs are.
const (
	RedisStandalone = "standalone" // one Redis (with replicas or not)
	RedisSentinel   = "sentinel"   // the sentinels of one master named redis.master_name
	RedisCluster    = "cluster"    // seed nodes of a Redis Cluster
	RedisRedlock    = "redlock"    // independent masters, locked with Redlock
)

// RedisModes lists the values of redis.mode.
var RedisModes = []string{RedisStandalone, RedisSentinel, RedisCluster, RedisRedlock}

// RedisMode returns redis.mode, standalone when it is not set.
func (c Config) RedisMode() string {
	if c.Redis.Mode == "" {
		return RedisStandalone
	}
	return c.Redis.Mode
}

// validateRedis checks redis.mode against the addresses and the settings
// only some modes use.
func (c Config) validateRedis() error {
	r := c.Redis
	if r.Mode == "" && len(r.Addrs) > 1 {
		return fmt.Errorf("config: redis.addrs has %d addresses but redis.mode (SECKILL_REDIS_MODE) is not set: want one of %s",
			len(r.Addrs), strings.Join(RedisModes, ", "))
	}
	mode := c.RedisMode()
	switch {
	case len(r.Addrs) == 0 && mode != RedisStandalone:
		return fmt.Errorf("config: redis.mode %s needs redis.addrs (SECKILL_REDIS_ADDRS)", mode)
	case mode == RedisStandalone && len(r.Addrs) > 1:
		return fmt.Errorf("config: redis.mode standalone takes one address in redis.addrs, not %d", len(r.Addrs))
	case mode == RedisRedlock && len(r.Addrs) < 2:
		return errors.New("config: redis.mode redlock needs independent masters in redis.addrs (3 or more to survive one failing)")
	case mode == RedisSentinel && r.MasterName == "":
		return errors.New("config: redis.mode sentinel needs redis.master_name (SECKILL_REDIS_MASTER_NAME)")
	case mode != RedisSentinel && (r.MasterName != "" || r.SentinelUsername != "" || r.SentinelPassword != ""):
		return fmt.Errorf("config: redis.master_name and redis.sentinel_* are for redis.mode sentinel, not %s", mode)
	case mode == RedisCluster && r.DB != 0:
		return errors.New("config: redis.db must be 0 with redis.mode cluster")
	case !r.TLS.Enabled && (r.TLS.CAFile != "" || r.TLS.ServerName != ""):
		return errors.New("config: redis.tls.ca_file and redis.tls.server_name need redis.tls.enabled (SECKILL_REDIS_TLS)")
	}
	// A brace in the prefix would make it the hash tag of every key, all in
	// one Cluster slot; the SKU's own tag ({sku:7}) is what spreads them.
	if strings.ContainsAny(c.Lock.Prefix, "{}") {
		return errors.New("config: lock.prefix must not contain { or }: the SKU id is the hash tag")
	}
	l := c.Lock
	switch {
	case l.MinReplicas > 0 && (mode == RedisRedlock || len(r.Addrs) == 0):
		return errors.New("config: lock.min_replicas needs a Redis with replicas (redis.mode standalone, sentinel or cluster)")
	case l.MinReplicas > 0 && (l.ReplicaTimeout <= 0 || l.ReplicaTimeout >= r.IOTimeout):
		return errors.New("config: lock.replica_timeout must be positive and shorter than redis.io_timeout")
	}
	return nil
}
