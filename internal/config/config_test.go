package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoad_ShippedConfigsAreValid(t *testing.T) {
	for _, f := range []string{"seckill.yaml", "local.yaml"} {
		t.Run(f, func(t *testing.T) {
			cfg, err := Load(filepath.Join("..", "..", "configs", f), env(nil))
			if err != nil {
				t.Fatalf("Load(%s) = %v", f, err)
			}
			if f == "seckill.yaml" && !equalConfig(cfg, Default()) {
				t.Errorf("configs/seckill.yaml differs from Default(): the documented defaults are stale")
			}
		})
	}
}

func equalConfig(a, b Config) bool {
	return strings.Join(a.Redis.Addrs, ",") == strings.Join(b.Redis.Addrs, ",") &&
		a.HTTP == b.HTTP && sameMySQL(a.MySQL, b.MySQL) && a.Order == b.Order && a.Lock == b.Lock &&
		a.SoldOut == b.SoldOut && a.Log == b.Log && a.Admin == b.Admin && a.Events == b.Events &&
		a.Limits.PerUserRate == b.Limits.PerUserRate && a.Limits.PerUserBurst == b.Limits.PerUserBurst &&
		a.Limits.PerIPRate == b.Limits.PerIPRate && a.Limits.PerIPBurst == b.Limits.PerIPBurst &&
		a.Limits.MaxKeys == b.Limits.MaxKeys && len(a.Limits.TrustedProxies) == len(b.Limits.TrustedProxies) &&
		a.Redis.DialTimeout == b.Redis.DialTimeout && a.Redis.IOTimeout == b.Redis.IOTimeout &&
		a.Redis.PoolSize == b.Redis.PoolSize && a.Redis.DB == b.Redis.DB
}

// sameMySQL compares the mysql settings, an empty list equal to none.
func sameMySQL(a, b MySQL) bool {
	same := strings.Join(a.Replicas, ",") == strings.Join(b.Replicas, ",")
	a.Replicas, b.Replicas = nil, nil
	return same && reflect.DeepEqual(a, b)
}

func TestLoad_EnvOverridesTheFile(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "..", "configs", "local.yaml"), env(map[string]string{
		"SECKILL_HTTP_ADDR":       "127.0.0.1:9999",
		"SECKILL_REDIS_ADDRS":     "127.0.0.1:7001, 127.0.0.1:7002,127.0.0.1:7003",
		"SECKILL_REDIS_MODE":      "redlock",
		"SECKILL_ORDER_BATCH_MAX": "64",
		"SECKILL_LOCK_TTL":        "3s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Addr != "127.0.0.1:9999" || len(cfg.Redis.Addrs) != 3 || cfg.Order.BatchMax != 64 || cfg.Lock.TTL.String() != "3s" {
		t.Errorf("env not applied: %+v", cfg)
	}
}

func TestLoad_InvalidSettingsNameTheirKey(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		key  string
	}{
		{"bad address", "", map[string]string{"SECKILL_HTTP_ADDR": "nonsense"}, "http.addr"},
		{"not an integer", "", map[string]string{"SECKILL_ORDER_QUEUE_MAX": "many"}, "SECKILL_ORDER_QUEUE_MAX"},
		{"zero batch", "order:\n  batch_max: 0\n", nil, "order.batch_max"},
		{"unknown yaml key", "order:\n  batchmax: 5\n", nil, "batchmax"},
		{"dsn without token", "", map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x", "SECKILL_REDIS_ADDRS": "127.0.0.1:6379"}, "admin.token"},
		{"dsn without redis", "", map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x", "SECKILL_ADMIN_TOKEN": "0123456789abcdef"}, "redis.addrs"},
		{"several addresses, no mode", "", map[string]string{"SECKILL_REDIS_ADDRS": "127.0.0.1:7001,127.0.0.1:7002"}, "standalone, sentinel, cluster, redlock"},
		{"unknown mode", "", map[string]string{"SECKILL_REDIS_MODE": "ring", "SECKILL_REDIS_ADDRS": "127.0.0.1:7001"}, "redis.mode"},
		{"sentinel without master name", "", map[string]string{"SECKILL_REDIS_MODE": "sentinel", "SECKILL_REDIS_ADDRS": "127.0.0.1:26379"}, "redis.master_name"},
		{"standalone with two addresses", "", map[string]string{"SECKILL_REDIS_MODE": "standalone", "SECKILL_REDIS_ADDRS": "127.0.0.1:7001,127.0.0.1:7002"}, "redis.mode standalone"},
		{"master name outside sentinel", "", map[string]string{"SECKILL_REDIS_MASTER_NAME": "m", "SECKILL_REDIS_ADDRS": "127.0.0.1:7001"}, "redis.master_name"},
		{"cluster with a db", "redis:\n  db: 2\n", map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_ADDRS": "127.0.0.1:7001"}, "redis.db"},
		{"tls ca without tls", "", map[string]string{"SECKILL_REDIS_TLS_CA_FILE": "/etc/ca.pem"}, "redis.tls"},
		{"tls not a boolean", "", map[string]string{"SECKILL_REDIS_TLS": "maybe"}, "SECKILL_REDIS_TLS"},
		{"brace in the lock prefix", "", map[string]string{"SECKILL_LOCK_PREFIX": "x:{a}:"}, "lock.prefix"},
		{"min replicas with redlock", "", map[string]string{"SECKILL_REDIS_MODE": "redlock", "SECKILL_REDIS_ADDRS": "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003", "SECKILL_LOCK_MIN_REPLICAS": "1"}, "lock.min_replicas"},
		{"replica timeout past io timeout", "", map[string]string{"SECKILL_REDIS_ADDRS": "127.0.0.1:7001", "SECKILL_LOCK_MIN_REPLICAS": "1", "SECKILL_LOCK_REPLICA_TIMEOUT": "1s"}, "lock.replica_timeout"},
		{"short token", "", map[string]string{"SECKILL_ADMIN_TOKEN": "short"}, "admin.token"},
		{"bad log level", "", map[string]string{"SECKILL_LOG_LEVEL": "loud"}, "log.level"},
		{"duration as an integer", "lock:\n  ttl: 3\n", nil, "line 2: lock.ttl: want a duration like 3s or 200ms, got 3"},
		{"duration as words", "http:\n  drain_delay: soon\n", nil, "http.drain_delay: want a duration like 3s"},
		{"boolean as a word", "lock:\n  watchdog: maybe\n", nil, "lock.watchdog: want true or false, got maybe"},
		{"integer as a word", "order:\n  queue_max: lots\n", nil, "order.queue_max: want an integer, got lots"},
		{"list as a mapping", "redis:\n  addrs: {a: b}\n", nil, "redis.addrs: want a list of strings, got a mapping"},
		{"access log not a boolean", "", map[string]string{"SECKILL_LOG_ACCESS": "yes please"}, "SECKILL_LOG_ACCESS"},
		{"mysql min replicas without replicas", "", map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x", "SECKILL_MYSQL_MIN_REPLICAS": "1"}, "mysql.min_replicas"},
		{"mysql min replicas above the list", "", map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x", "SECKILL_MYSQL_REPLICAS": "root@tcp(127.0.0.1:3307)/", "SECKILL_MYSQL_MIN_REPLICAS": "2"}, "mysql.min_replicas"},
		{"mysql min replicas negative", "", map[string]string{"SECKILL_MYSQL_MIN_REPLICAS": "-1"}, "mysql.min_replicas"},
		{"mysql replica not a dsn", "", map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x", "SECKILL_MYSQL_REPLICAS": "secret:pw@nonsense(("}, "mysql.replicas"},
		{"mysql replicas without a dsn", "", map[string]string{"SECKILL_MYSQL_REPLICAS": "root@tcp(127.0.0.1:3307)/"}, "mysql.replicas"},
		{"mysql replica timeout zero", "", map[string]string{"SECKILL_MYSQL_REPLICA_TIMEOUT": "0s"}, "mysql.replica_timeout"},
		{"request timeout past the write timeout", "", map[string]string{"SECKILL_ORDER_REQUEST_TIMEOUT": "30s"}, "http.write_timeout"},
		{"mysql replica timeout past the request", "", map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x", "SECKILL_MYSQL_REPLICAS": "root@tcp(127.0.0.1:3307)/",
			"SECKILL_MYSQL_MIN_REPLICAS": "1", "SECKILL_MYSQL_REPLICA_TIMEOUT": "20s"}, "mysql.replica_timeout"},
		{"places max past its ceiling", "", map[string]string{"SECKILL_ORDER_PLACES_MAX": "9223372036854775807"}, "order.places_max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.yaml != "" {
				path = filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".yaml")
				if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := Load(path, env(tt.env))
			if err == nil {
				err = cfg.ValidateServe()
			}
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("Load = %v; want an error naming %q", err, tt.key)
			}
		})
	}
}

func TestLoad_EmptyFileMeansDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, env(nil)); err != nil {
		t.Errorf("Load(empty file) = %v", err)
	}
}

func TestValidate_MigrateNeedsOnlyTheDSN(t *testing.T) {
	cfg, err := Load("", env(map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x"}))
	if err != nil {
		t.Errorf("Load(DSN only) = %v; want ok for migrate", err)
	}
	if err := cfg.ValidateServe(); err == nil {
		t.Error("ValidateServe(DSN only) = nil; want redis.addrs required")
	}
}

func TestLoad_RedisModes(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		mode string
	}{
		{"one address", map[string]string{"SECKILL_REDIS_ADDRS": "127.0.0.1:6379"}, RedisStandalone},
		{"embedded", nil, RedisStandalone},
		{"sentinel", map[string]string{"SECKILL_REDIS_MODE": "sentinel", "SECKILL_REDIS_ADDRS": "s1:26379,s2:26379,s3:26379",
			"SECKILL_REDIS_MASTER_NAME": "seckill", "SECKILL_REDIS_SENTINEL_PASSWORD": "x", "SECKILL_LOCK_MIN_REPLICAS": "1"}, RedisSentinel},
		{"cluster with tls", map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_ADDRS": "n1:6379,n2:6379",
			"SECKILL_REDIS_TLS": "true", "SECKILL_REDIS_TLS_SERVER_NAME": "redis.internal", "SECKILL_REDIS_USERNAME": "seckill"}, RedisCluster},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load("", env(tc.env))
			if err != nil {
				t.Fatalf("Load = %v", err)
			}
			if got := cfg.RedisMode(); got != tc.mode {
				t.Errorf("RedisMode() = %q; want %q", got, tc.mode)
			}
		})
	}
}

func TestValidate_HoldAndTransactionMustFitTheLeaseWithoutWatchdog(t *testing.T) {
	cases := []struct {
		name     string
		watchdog bool
		hold, tx time.Duration
		ok       bool
	}{
		{"watchdog on, long transaction", true, 50 * time.Millisecond, 10 * time.Second, true},
		{"watchdog off, fits", false, 50 * time.Millisecond, 2 * time.Second, true},
		{"watchdog off, transaction alone fills the lease", false, 0, 3 * time.Second, false},
		{"watchdog off, hold plus transaction reach the lease", false, time.Second, 2 * time.Second, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default() // lock.ttl 3s
			c.Lock.Watchdog, c.Lock.HoldMax, c.Order.TxTimeout = tc.watchdog, tc.hold, tc.tx
			err := c.Validate()
			if tc.ok && err != nil {
				t.Errorf("Validate() = %v; want nil", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "lock.hold_max") || !strings.Contains(err.Error(), "order.tx_timeout") || !strings.Contains(err.Error(), "lock.ttl")) {
				t.Errorf("Validate() = %v; want an error naming lock.hold_max, order.tx_timeout and lock.ttl", err)
			}
		})
	}
}

// TestValidate_ReplicaDSNNeverEchoed: a replica DSN that does not parse is
// named by its place in the list, never printed: it may hold a password.
func TestValidate_ReplicaDSNNeverEchoed(t *testing.T) {
	_, err := Load("", env(map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x",
		"SECKILL_MYSQL_REPLICAS": "root@tcp(127.0.0.1:3307)/,repl:s3cret@nonsense(("}))
	if err == nil || !strings.Contains(err.Error(), "item 2") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Load = %v; want item 2 named and the password absent", err)
	}
}
