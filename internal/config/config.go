// Package config loads the service's one typed Config: defaults, then an
// optional YAML file, then SECKILL_* environment variables, then validation.
// An invalid value fails start-up with a message that names its key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
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
}

// Limits are the rate limits; a zero rate turns one off. The defaults
// never throttle the project's own load tests, whose buyers send a few
// requests each and all come from 127.0.0.1.
type Limits struct {
	PerUserRate    float64  `yaml:"per_user_rate"`   // order requests/s per user_id, default 20
	PerUserBurst   int      `yaml:"per_user_burst"`  // default 40
	PerIPRate      float64  `yaml:"per_ip_rate"`     // requests/s per client IP on /api, default 0 (off)
	PerIPBurst     int      `yaml:"per_ip_burst"`    // default 200
	MaxKeys        int      `yaml:"max_keys"`        // users or IPs tracked; beyond it the least recently used is evicted, default 100000
	TrustedProxies []string `yaml:"trusted_proxies"` // may set X-Forwarded-For; default none
}

// HTTP configures the listener and its protective limits.
type HTTP struct {
	Addr              string        `yaml:"addr"`                // default 127.0.0.1:8080
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"` // default 5s
	ReadTimeout       time.Duration `yaml:"read_timeout"`        // default 10s
	WriteTimeout      time.Duration `yaml:"write_timeout"`       // default 30s
	IdleTimeout       time.Duration `yaml:"idle_timeout"`        // default 120s
	ShutdownTimeout   time.Duration `yaml:"shutdown_timeout"`    // default 20s
	// DrainDelay is how long /readyz answers 503 "draining" after SIGTERM
	// before the listener closes, so a load balancer stops sending first.
	DrainDelay   time.Duration `yaml:"drain_delay"`    // default 0 (set ~5s behind a balancer)
	MaxBodyBytes int64         `yaml:"max_body_bytes"` // default 4096
	// AdminAddr, when set, serves /metrics on a listener of its own
	// (and pprof, when DebugAddr is the same address) instead of on the
	// API's, so that it need not be public.
	AdminAddr string `yaml:"admin_addr"` // default "" (/metrics on the API listener)
	// DebugAddr, when set, serves net/http/pprof there (keep it on loopback).
	DebugAddr string `yaml:"debug_addr"` // default "" (off)
	// ReadyCache is how long /readyz reuses one round of dependency
	// checks: the public, unthrottled probe costs the database and Redis
	// one round per period whatever its callers do.
	ReadyCache time.Duration `yaml:"ready_cache"` // default 1s
	// BenchEndpoints mounts POST /bench/constant, which reads the body and
	// answers a constant order: the HTTP ceiling `make bench` measures
	// against. Never on in production.
	BenchEndpoints bool `yaml:"bench_endpoints"` // default false
}

// MySQL configures the source of truth. An empty DSN selects the embedded
// SQLite store of the quick start.
type MySQL struct {
	DSN          string        `yaml:"dsn"`
	MaxOpenConns int           `yaml:"max_open_conns"` // default 24: instances x this must stay under the server's max_connections
	MaxIdleConns int           `yaml:"max_idle_conns"` // default 24
	ConnMaxLife  time.Duration `yaml:"conn_max_life"`  // default 5m
	// IOTimeout bounds each read and write of a connection, the backstop
	// of statements no context bounds (an admin transaction's COMMIT). It
	// outlasts the server's innodb_lock_wait_timeout (50s), so that a
	// lock wait ends with the server's own error first. Migrations run
	// without it.
	IOTimeout time.Duration `yaml:"io_timeout"` // default 60s
}

// Redis configures the lock and the shared sold-out marks. No address
// selects the embedded in-process Redis of the quick start. Mode says what
// the addresses are (see RedisModes); more than one address needs a mode.
type Redis struct {
	Mode        string        `yaml:"mode"` // standalone, sentinel, cluster or redlock; default standalone for one address
	Addrs       []string      `yaml:"addrs"`
	Username    string        `yaml:"username"` // ACL user of the Redis nodes (every mode), default none
	Password    string        `yaml:"password"`
	DB          int           `yaml:"db"`
	DialTimeout time.Duration `yaml:"dial_timeout"` // default 200ms
	IOTimeout   time.Duration `yaml:"io_timeout"`   // default 200ms
	PoolSize    int           `yaml:"pool_size"`    // default 64
	// MasterName, SentinelUsername and SentinelPassword are for mode
	// sentinel: the addresses are the sentinels, which name the master.
	MasterName       string   `yaml:"master_name"`
	SentinelUsername string   `yaml:"sentinel_username"`
	SentinelPassword string   `yaml:"sentinel_password"`
	TLS              RedisTLS `yaml:"tls"`
}

// RedisTLS turns on TLS to every Redis node (and sentinel).
type RedisTLS struct {
	Enabled    bool   `yaml:"enabled"`     // default false
	CAFile     string `yaml:"ca_file"`     // PEM roots; default the system's
	ServerName string `yaml:"server_name"` // default the host of each address
}

// Admin configures the admin API. An empty token is generated at start
// (quick start only: with a MySQL DSN the token is required).
type Admin struct {
	Token string `yaml:"token"`
}

// Order configures the order path.
type Order struct {
	QueueMax       int           `yaml:"queue_max"`       // waiting requests per SKU per process, default 10000
	BatchMax       int           `yaml:"batch_max"`       // orders per transaction, default 256
	RequestTimeout time.Duration `yaml:"request_timeout"` // how long a buyer waits in all, default 10s
	TxTimeout      time.Duration `yaml:"tx_timeout"`      // one batch transaction, default 5s
	MaxRetries     int           `yaml:"max_retries"`     // version conflicts per batch, default 50
	IdleTimeout    time.Duration `yaml:"idle_timeout"`    // an idle SKU worker exits after, default 5s
	// MaxLiveSKUs bounds the SKU queues (each with its worker) of one
	// process. A full table evicts an idle queue (first one whose last
	// batch sold nothing); when every queue has work, an order for one
	// more SKU is answered 429 busy.
	MaxLiveSKUs int `yaml:"max_live_skus"` // default 1024
	// UnknownSKUTTL is how long an id found not to exist is answered 404
	// without a database read: a SKU created through another instance
	// becomes sellable here within it (through this one, at once).
	UnknownSKUTTL time.Duration `yaml:"unknown_sku_ttl"` // default 1s
	// Linger is how long a SKU's worker waits for more orders before a
	// commit, only when more orders than its batch holds are expected to
	// arrive within it (service/linger.go): a moderate rate then shares a
	// transaction instead of paying one per order. An idle or a saturated
	// SKU commits at once. A group-commit round waits as long for other
	// SKUs' batches, only when those expected would at least double it
	// (repository.GroupLinger): a moderate rate spread over many SKUs then
	// shares a transaction too. The latency traded is at most Linger per
	// order at each step; 0 turns both off.
	Linger time.Duration `yaml:"linger"` // default 5ms (the trade-off: docs/performance.md), at most 100ms
	// PaymentTimeout is how long a new order stays pending, holding its
	// units, before it expires unpaid and they return to the sale; 0: an
	// order is paid at creation (see lifecycle.go).
	PaymentTimeout time.Duration `yaml:"payment_timeout"` // default 15m
	SweepInterval  time.Duration `yaml:"sweep_interval"`  // how often the elected sweeper expires due orders, default 1s
	SweepBatch     int           `yaml:"sweep_batch"`     // orders expired per transaction, default 256
}

// Lock configures the per-SKU Redis lock.
type Lock struct {
	Prefix   string        `yaml:"prefix"`    // default "seckill:lock:"
	TTL      time.Duration `yaml:"ttl"`       // lease, default 3s (renewed by the watchdog while held)
	Wait     time.Duration `yaml:"wait"`      // longest wait for a lock whose holder shows no sign of life before selling without it, default 1s (live holders: up to order.tx_timeout/2)
	QueueMax int           `yaml:"queue_max"` // local waiters per key, default 1024
	Watchdog bool          `yaml:"watchdog"`  // renew the lease while held, default true
	// WantedNotices: a refused acquisition publishes the key, so that its
	// holder lets it go at once instead of at its next hold_max; default
	// true (an ACL user then needs the channel &<prefix>wanted).
	WantedNotices bool          `yaml:"wanted_notices"`
	HoldMax       time.Duration `yaml:"hold_max"`  // a busy SKU worker keeps its lock across batches this long, default 50ms; 0: one hold per batch
	HoldIdle      time.Duration `yaml:"hold_idle"` // a worker whose queue emptied keeps its lock this long for the next order, default 1s; 0: lets it go at once
	Backend       string        `yaml:"backend"`   // redis or zookeeper, default redis
	// MinReplicas > 0 makes every acquisition WAIT for that many replicas
	// to acknowledge it within ReplicaTimeout, else it is released and not
	// obtained (the order then sells on the database's guard).
	MinReplicas    int           `yaml:"min_replicas"`    // default 0
	ReplicaTimeout time.Duration `yaml:"replica_timeout"` // default 100ms; shorter than redis.io_timeout
}

// SoldOut configures the sold-out fast path.
type SoldOut struct {
	LocalTTL  time.Duration `yaml:"local_ttl"`  // how long a local mark is trusted, default 500ms
	SharedTTL time.Duration `yaml:"shared_ttl"` // lifetime of the shared mark in Redis, default 10m
	// Recheck is how long a local "sold out" is used before the SKU's row
	// is read again (one read per SKU per process per Recheck). A restock
	// made through another instance is seen within LocalTTL + Recheck,
	// whatever Redis does.
	Recheck time.Duration `yaml:"recheck"` // default 1s
}

// Log configures log/slog.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error; default info
	Format string `yaml:"format"` // text or json; default json, text in the quick start
	// Access writes one line per HTTP request (method, route, status,
	// latency, request ID, bytes) at info level.
	Access bool `yaml:"access"` // default true
}

// maxLinger bounds order.linger: it is latency every lingering buyer pays.
const maxLinger = 100 * time.Millisecond

// Default returns the documented defaults.
func Default() Config {
	return Config{
		HTTP: HTTP{
			Addr:              "127.0.0.1:8080",
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       120 * time.Second,
			ShutdownTimeout:   20 * time.Second,
			MaxBodyBytes:      4096,
			ReadyCache:        time.Second,
		},
		MySQL: MySQL{MaxOpenConns: 24, MaxIdleConns: 24, ConnMaxLife: 5 * time.Minute, IOTimeout: time.Minute},
		Redis: Redis{DialTimeout: 200 * time.Millisecond, IOTimeout: 200 * time.Millisecond, PoolSize: 64},
		Order: Order{
			QueueMax:       10000,
			BatchMax:       256,
			RequestTimeout: 10 * time.Second,
			TxTimeout:      5 * time.Second,
			MaxRetries:     50,
			IdleTimeout:    5 * time.Second,
			MaxLiveSKUs:    1024,
			UnknownSKUTTL:  time.Second,
			Linger:         5 * time.Millisecond,
			PaymentTimeout: DefaultPaymentTimeout,
			SweepInterval:  DefaultSweepInterval,
			SweepBatch:     DefaultSweepBatch,
		},
		Lock: Lock{
			Prefix:        "seckill:lock:",
			TTL:           3 * time.Second,
			Wait:          time.Second,
			QueueMax:      1024,
			Watchdog:      true,
			WantedNotices: true,
			HoldMax:       50 * time.Millisecond,
			HoldIdle:      time.Second,
			Backend:       BackendRedis,

			ReplicaTimeout: 100 * time.Millisecond,
		},
		SoldOut: SoldOut{LocalTTL: 500 * time.Millisecond, SharedTTL: 10 * time.Minute, Recheck: time.Second},
		Limits:  Limits{PerUserRate: 20, PerUserBurst: 40, PerIPBurst: 200, MaxKeys: 100000},
		Log:     Log{Level: "info", Access: true},

		ZooKeeper: ZooKeeper{SessionTimeout: 6 * time.Second, Root: "/seckill"},
		Auth:      defaultAuth(),
	}
}

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
	if err := cfg.applyZooKeeperEnv(getenv); err != nil {
		return Config{}, err
	}
	if err := cfg.applyLifecycleEnv(getenv); err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

// Embedded reports whether the quick start's in-process stores are used.
func (c Config) Embedded() bool { return c.MySQL.DSN == "" }

func (c *Config) applyEnv(getenv func(string) string) error {
	str := func(key string, dst *string) {
		if v := getenv(key); v != "" {
			*dst = v
		}
	}
	str("SECKILL_HTTP_ADDR", &c.HTTP.Addr)
	str("SECKILL_DEBUG_ADDR", &c.HTTP.DebugAddr)
	str("SECKILL_HTTP_ADMIN_ADDR", &c.HTTP.AdminAddr)
	if v := getenv("SECKILL_BENCH_ENDPOINTS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_BENCH_ENDPOINTS=%q: not a boolean", v)
		}
		c.HTTP.BenchEndpoints = b
	}
	if v := getenv("SECKILL_LOG_ACCESS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_LOG_ACCESS=%q: want true or false", v)
		}
		c.Log.Access = b
	}
	if err := c.Auth.applyEnv(getenv); err != nil {
		return err
	}
	str("SECKILL_MYSQL_DSN", &c.MySQL.DSN)
	str("SECKILL_ADMIN_TOKEN", &c.Admin.Token)
	str("SECKILL_LOG_LEVEL", &c.Log.Level)
	str("SECKILL_LOG_FORMAT", &c.Log.Format)
	str("SECKILL_REDIS_PASSWORD", &c.Redis.Password)
	str("SECKILL_LOCK_PREFIX", &c.Lock.Prefix)
	if v := getenv("SECKILL_REDIS_ADDRS"); v != "" {
		c.Redis.Addrs = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Redis.Addrs = append(c.Redis.Addrs, a)
			}
		}
	}
	if err := c.applyRedisEnv(getenv); err != nil {
		return err
	}
	ints := []struct {
		key string
		dst *int
	}{
		{"SECKILL_ORDER_QUEUE_MAX", &c.Order.QueueMax},
		{"SECKILL_ORDER_BATCH_MAX", &c.Order.BatchMax},
		{"SECKILL_ORDER_MAX_LIVE_SKUS", &c.Order.MaxLiveSKUs},
		{"SECKILL_MYSQL_MAX_OPEN_CONNS", &c.MySQL.MaxOpenConns},
	}
	for _, it := range ints {
		if v := getenv(it.key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("config: %s=%q: not an integer", it.key, v)
			}
			*it.dst = n
		}
	}
	floats := []struct {
		key string
		dst *float64
	}{
		{"SECKILL_LIMITS_PER_USER_RATE", &c.Limits.PerUserRate},
		{"SECKILL_LIMITS_PER_IP_RATE", &c.Limits.PerIPRate},
	}
	for _, it := range floats {
		if v := getenv(it.key); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("config: %s=%q: not a number", it.key, v)
			}
			*it.dst = f
		}
	}
	durs := []struct {
		key string
		dst *time.Duration
	}{
		{"SECKILL_MYSQL_IO_TIMEOUT", &c.MySQL.IOTimeout},
		{"SECKILL_ORDER_REQUEST_TIMEOUT", &c.Order.RequestTimeout},
		{"SECKILL_ORDER_LINGER", &c.Order.Linger},
		{"SECKILL_LOCK_TTL", &c.Lock.TTL},
		{"SECKILL_LOCK_HOLD_MAX", &c.Lock.HoldMax},
		{"SECKILL_LOCK_HOLD_IDLE", &c.Lock.HoldIdle},
		{"SECKILL_HTTP_SHUTDOWN_TIMEOUT", &c.HTTP.ShutdownTimeout},
		{"SECKILL_HTTP_DRAIN_DELAY", &c.HTTP.DrainDelay},
		{"SECKILL_HTTP_READY_CACHE", &c.HTTP.ReadyCache},
	}
	for _, it := range durs {
		if v := getenv(it.key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("config: %s=%q: not a duration", it.key, v)
			}
			*it.dst = d
		}
	}
	return nil
}

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
		return fmt.Errorf("config: http.addr %q: %v", c.HTTP.Addr, err)
	}
	if c.HTTP.DebugAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.DebugAddr); err != nil {
			return fmt.Errorf("config: http.debug_addr %q: %v", c.HTTP.DebugAddr, err)
		}
	}
	if c.HTTP.AdminAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.AdminAddr); err != nil {
			return fmt.Errorf("config: http.admin_addr %q: %v", c.HTTP.AdminAddr, err)
		}
		if c.HTTP.AdminAddr == c.HTTP.Addr {
			return fmt.Errorf("config: http.admin_addr %q is http.addr: leave it empty to serve /metrics on the API listener", c.HTTP.AdminAddr)
		}
	}
	positive := []struct {
		key string
		v   int64
	}{
		{"http.read_header_timeout", int64(c.HTTP.ReadHeaderTimeout)},
		{"http.read_timeout", int64(c.HTTP.ReadTimeout)},
		{"http.write_timeout", int64(c.HTTP.WriteTimeout)},
		{"http.idle_timeout", int64(c.HTTP.IdleTimeout)},
		{"http.shutdown_timeout", int64(c.HTTP.ShutdownTimeout)},
		{"http.max_body_bytes", c.HTTP.MaxBodyBytes},
		{"mysql.max_open_conns", int64(c.MySQL.MaxOpenConns)},
		{"mysql.io_timeout", int64(c.MySQL.IOTimeout)},
		{"redis.dial_timeout", int64(c.Redis.DialTimeout)},
		{"redis.io_timeout", int64(c.Redis.IOTimeout)},
		{"redis.pool_size", int64(c.Redis.PoolSize)},
		{"order.queue_max", int64(c.Order.QueueMax)},
		{"order.batch_max", int64(c.Order.BatchMax)},
		{"order.request_timeout", int64(c.Order.RequestTimeout)},
		{"order.tx_timeout", int64(c.Order.TxTimeout)},
		{"order.max_retries", int64(c.Order.MaxRetries)},
		{"order.idle_timeout", int64(c.Order.IdleTimeout)},
		{"order.max_live_skus", int64(c.Order.MaxLiveSKUs)},
		{"order.unknown_sku_ttl", int64(c.Order.UnknownSKUTTL)},
		{"lock.ttl", int64(c.Lock.TTL)},
		{"lock.wait", int64(c.Lock.Wait)},
		{"lock.queue_max", int64(c.Lock.QueueMax)},
		{"sold_out.local_ttl", int64(c.SoldOut.LocalTTL)},
		{"sold_out.shared_ttl", int64(c.SoldOut.SharedTTL)},
		{"sold_out.recheck", int64(c.SoldOut.Recheck)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("config: %s must be positive", p.key)
		}
	}
	if c.Lock.HoldMax < 0 || c.Lock.HoldMax >= c.Lock.TTL {
		return errors.New("config: lock.hold_max must be at least 0 and shorter than lock.ttl")
	}
	if c.Lock.HoldIdle < 0 {
		return errors.New("config: lock.hold_idle must not be negative")
	}
	if c.HTTP.DrainDelay < 0 {
		return errors.New("config: http.drain_delay must not be negative")
	}
	if c.HTTP.ReadyCache < 0 {
		return errors.New("config: http.ready_cache must not be negative")
	}
	if c.Limits.PerUserRate < 0 || c.Limits.PerIPRate < 0 {
		return errors.New("config: limits.per_user_rate and limits.per_ip_rate must not be negative (0 is off)")
	}
	if c.Limits.PerUserBurst < 1 || c.Limits.PerIPBurst < 1 || c.Limits.MaxKeys < 1 {
		return errors.New("config: limits.per_user_burst, limits.per_ip_burst and limits.max_keys must be positive")
	}
	for _, p := range c.Limits.TrustedProxies {
		if net.ParseIP(p) == nil {
			if _, _, err := net.ParseCIDR(p); err != nil {
				return fmt.Errorf("config: limits.trusted_proxies %q: not an IP or CIDR", p)
			}
		}
	}
	if c.MySQL.MaxIdleConns < 0 {
		return errors.New("config: mysql.max_idle_conns must not be negative")
	}
	if c.Order.Linger < 0 || c.Order.Linger > maxLinger {
		return fmt.Errorf("config: order.linger must be between 0 and %v", maxLinger)
	}
	if c.Order.BatchMax > 10000 {
		return errors.New("config: order.batch_max must be at most 10000")
	}
	if !c.Lock.Watchdog && c.Lock.HoldMax+c.Order.TxTimeout >= c.Lock.TTL {
		// A worker may start a batch just before its hold ends and run it
		// for a whole tx_timeout: the lease must outlive both.
		return fmt.Errorf("config: lock.hold_max (%v) + order.tx_timeout (%v) must be shorter than lock.ttl (%v) unless lock.watchdog is on",
			c.Lock.HoldMax, c.Order.TxTimeout, c.Lock.TTL)
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
	for _, a := range c.Redis.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("config: redis.addrs %q: %v", a, err)
		}
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
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		return fmt.Errorf("config: log.level %q: want debug, info, warn or error", c.Log.Level)
	}
	if !slices.Contains([]string{"", "text", "json"}, c.Log.Format) {
		return fmt.Errorf("config: log.format %q: want text or json", c.Log.Format)
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

func (c *Config) applyRedisEnv(getenv func(string) string) error {
	for key, dst := range map[string]*string{
		"SECKILL_REDIS_MODE":              &c.Redis.Mode,
		"SECKILL_REDIS_USERNAME":          &c.Redis.Username,
		"SECKILL_REDIS_MASTER_NAME":       &c.Redis.MasterName,
		"SECKILL_REDIS_SENTINEL_USERNAME": &c.Redis.SentinelUsername,
		"SECKILL_REDIS_SENTINEL_PASSWORD": &c.Redis.SentinelPassword,
		"SECKILL_REDIS_TLS_CA_FILE":       &c.Redis.TLS.CAFile,
		"SECKILL_REDIS_TLS_SERVER_NAME":   &c.Redis.TLS.ServerName,
	} {
		if v := getenv(key); v != "" {
			*dst = v
		}
	}
	if v := getenv("SECKILL_REDIS_TLS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_REDIS_TLS=%q: not a boolean", v)
		}
		c.Redis.TLS.Enabled = b
	}
	if v := getenv("SECKILL_LOCK_MIN_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_LOCK_MIN_REPLICAS=%q: not an integer", v)
		}
		c.Lock.MinReplicas = n
	}
	if v := getenv("SECKILL_LOCK_REPLICA_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_LOCK_REPLICA_TIMEOUT=%q: not a duration", v)
		}
		c.Lock.ReplicaTimeout = d
	}
	return nil
}

// validateRedis checks redis.mode against the addresses and the settings
// only some modes use.
func (c Config) validateRedis() error {
	r := c.Redis
	if r.Mode == "" && len(r.Addrs) > 1 {
		return fmt.Errorf("config: redis.addrs has %d addresses but redis.mode (SECKILL_REDIS_MODE) is not set: want one of %s",
			len(r.Addrs), strings.Join(RedisModes, ", "))
	}
	if r.Mode != "" && !slices.Contains(RedisModes, r.Mode) {
		return fmt.Errorf("config: redis.mode %q: want one of %s", r.Mode, strings.Join(RedisModes, ", "))
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
	case l.MinReplicas < 0:
		return errors.New("config: lock.min_replicas must not be negative")
	case l.MinReplicas > 0 && (mode == RedisRedlock || len(r.Addrs) == 0):
		return errors.New("config: lock.min_replicas needs a Redis with replicas (redis.mode standalone, sentinel or cluster)")
	case l.MinReplicas > 0 && (l.ReplicaTimeout <= 0 || l.ReplicaTimeout >= r.IOTimeout):
		return errors.New("config: lock.replica_timeout must be positive and shorter than redis.io_timeout")
	}
	return nil
}
