package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestSettings_EnvNamesKept: every variable the service has read keeps
// its name and its setting.
func TestSettings_EnvNamesKept(t *testing.T) {
	kept := map[string]string{
		"SECKILL_HTTP_ADDR": "http.addr", "SECKILL_DEBUG_ADDR": "http.debug_addr", "SECKILL_BENCH_ENDPOINTS": "http.bench_endpoints",
		"SECKILL_HTTP_SHUTDOWN_TIMEOUT": "http.shutdown_timeout", "SECKILL_HTTP_DRAIN_DELAY": "http.drain_delay", "SECKILL_HTTP_READY_CACHE": "http.ready_cache",
		"SECKILL_MYSQL_DSN": "mysql.dsn", "SECKILL_MYSQL_MAX_OPEN_CONNS": "mysql.max_open_conns",
		"SECKILL_REDIS_MODE": "redis.mode", "SECKILL_REDIS_ADDRS": "redis.addrs", "SECKILL_REDIS_USERNAME": "redis.username", "SECKILL_REDIS_PASSWORD": "redis.password",
		"SECKILL_REDIS_MASTER_NAME": "redis.master_name", "SECKILL_REDIS_SENTINEL_USERNAME": "redis.sentinel_username", "SECKILL_REDIS_SENTINEL_PASSWORD": "redis.sentinel_password",
		"SECKILL_REDIS_TLS": "redis.tls.enabled", "SECKILL_REDIS_TLS_CA_FILE": "redis.tls.ca_file", "SECKILL_REDIS_TLS_SERVER_NAME": "redis.tls.server_name",
		"SECKILL_ADMIN_TOKEN":     "admin.token",
		"SECKILL_ORDER_QUEUE_MAX": "order.queue_max", "SECKILL_ORDER_BATCH_MAX": "order.batch_max",
		"SECKILL_HTTP_ADMIN_ADDR": "http.admin_addr", "SECKILL_MYSQL_IO_TIMEOUT": "mysql.io_timeout",
		"SECKILL_ORDER_REQUEST_TIMEOUT": "order.request_timeout", "SECKILL_ORDER_LINGER": "order.linger", "SECKILL_ORDER_MAX_LIVE_SKUS": "order.max_live_skus",
		"SECKILL_ORDER_PAYMENT_TIMEOUT": "order.payment_timeout", "SECKILL_ORDER_SWEEP_INTERVAL": "order.sweep_interval", "SECKILL_ORDER_SWEEP_BATCH": "order.sweep_batch",
		"SECKILL_LOCK_PREFIX": "lock.prefix", "SECKILL_LOCK_TTL": "lock.ttl", "SECKILL_LOCK_HOLD_MAX": "lock.hold_max", "SECKILL_LOCK_HOLD_IDLE": "lock.hold_idle",
		"SECKILL_LOCK_BACKEND": "lock.backend", "SECKILL_LOCK_MIN_REPLICAS": "lock.min_replicas", "SECKILL_LOCK_REPLICA_TIMEOUT": "lock.replica_timeout",
		"SECKILL_ZOOKEEPER_ADDRS": "zookeeper.addrs", "SECKILL_ZOOKEEPER_SESSION_TIMEOUT": "zookeeper.session_timeout", "SECKILL_ZOOKEEPER_ROOT": "zookeeper.root",
		"SECKILL_LOG_LEVEL": "log.level", "SECKILL_LOG_FORMAT": "log.format", "SECKILL_LOG_ACCESS": "log.access",
		"SECKILL_LIMITS_PER_USER_RATE": "limits.per_user_rate", "SECKILL_LIMITS_PER_IP_RATE": "limits.per_ip_rate",
		"SECKILL_AUTH_SHOPPER": "auth.shopper", "SECKILL_AUTH_ORDER_ID_KEY": "auth.order_id_key", "SECKILL_AUTH_PAYMENT_TOKENS": "auth.payment_tokens",
		"SECKILL_AUTH_JWT_ALGORITHMS": "auth.jwt.algorithms", "SECKILL_AUTH_JWT_SECRET": "auth.jwt.secret", "SECKILL_AUTH_JWT_PUBLIC_KEY_FILE": "auth.jwt.public_key_file",
		"SECKILL_AUTH_JWT_JWKS": "auth.jwt.jwks", "SECKILL_AUTH_JWT_JWKS_REFRESH": "auth.jwt.jwks_refresh",
		"SECKILL_AUTH_JWT_JWKS_UNKNOWN_KID_INTERVAL": "auth.jwt.jwks_unknown_kid_interval", "SECKILL_AUTH_JWT_ISSUER": "auth.jwt.issuer",
		"SECKILL_AUTH_JWT_AUDIENCE": "auth.jwt.audience", "SECKILL_AUTH_JWT_LEEWAY": "auth.jwt.leeway", "SECKILL_AUTH_JWT_MAX_TOKEN_BYTES": "auth.jwt.max_token_bytes",
		"SECKILL_AUTH_JWT_CACHE_ENTRIES": "auth.jwt.cache_entries", "SECKILL_AUTH_JWT_CACHE_TTL": "auth.jwt.cache_ttl",
	}
	byEnv := map[string]string{}
	for _, s := range Settings() {
		if k, dup := byEnv[s.Env]; dup {
			t.Errorf("%s is the variable of both %s and %s", s.Env, k, s.Key)
		}
		byEnv[s.Env] = s.Key
	}
	for env, key := range kept {
		if byEnv[env] != key {
			t.Errorf("%s sets %q; want %s", env, byEnv[env], key)
		}
	}
}

// TestSettings_EveryEnvApplies: each setting's variable changes that
// setting and nothing else, lists comma-separated.
func TestSettings_EveryEnvApplies(t *testing.T) {
	for _, s := range Settings() {
		t.Run(s.Key, func(t *testing.T) {
			want := Default()
			f := want.field(s)
			var val string
			switch {
			case f.Type() == reflect.TypeOf(time.Duration(0)):
				val = "1234ms"
				f.SetInt(int64(1234 * time.Millisecond))
			case f.Kind() == reflect.String:
				val = "x-" + s.Key
				f.SetString(val)
			case f.Kind() == reflect.Bool:
				val = "false"
				if !f.Bool() {
					val = "true"
				}
				f.SetBool(!f.Bool())
			case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
				val = "77"
				f.SetInt(77)
			case f.Kind() == reflect.Float64:
				val = "7.5"
				f.SetFloat(7.5)
			case f.Kind() == reflect.Slice:
				val = " a:1, ,b:2"
				f.Set(reflect.ValueOf([]string{"a:1", "b:2"}))
			default:
				t.Fatalf("%s: no case for %s", s.Key, f.Type())
			}
			got := Default()
			if err := got.applyEnv(env(map[string]string{s.Env: val})); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s=%q gave %+v; want %+v", s.Env, val, got, want)
			}
		})
	}
}

// TestSettings_Declared: every setting has a help line, its default
// parses and its check holds for the default.
func TestSettings_Declared(t *testing.T) {
	d := Default()
	for _, s := range Settings() {
		if s.Help == "" {
			t.Errorf("%s has no help tag", s.Key)
		}
		if s.valid != "" {
			if err := check(d.field(s), s.valid); err != nil {
				t.Errorf("%s: default %q %v", s.Key, s.Default, err)
			}
		}
	}
}

// TestSettings_MessagesNameKeyAndEnv: a value outside its tag's bounds
// is refused naming the key and the variable.
func TestSettings_MessagesNameKeyAndEnv(t *testing.T) {
	for _, tc := range []struct{ env, val, want string }{
		{"SECKILL_ORDER_LINGER", "101ms", "order.linger (SECKILL_ORDER_LINGER) must be between 0s and 100ms"},
		{"SECKILL_MYSQL_MAX_OPEN_CONNS", "0", "mysql.max_open_conns (SECKILL_MYSQL_MAX_OPEN_CONNS) must be positive"},
		{"SECKILL_LOCK_HOLD_IDLE", "-1ms", "lock.hold_idle (SECKILL_LOCK_HOLD_IDLE) must not be negative"},
		{"SECKILL_AUTH_JWT_MAX_TOKEN_BYTES", "255", "auth.jwt.max_token_bytes (SECKILL_AUTH_JWT_MAX_TOKEN_BYTES) must be between 256 and 16384"},
		{"SECKILL_LOG_LEVEL", "loud", `log.level (SECKILL_LOG_LEVEL) "loud": want one of debug, info, warn, error`},
		{"SECKILL_LOG_FORMAT", "xml", `log.format (SECKILL_LOG_FORMAT) "xml": want one of json, text`},
		{"SECKILL_DEBUG_ADDR", "nowhere", `http.debug_addr (SECKILL_DEBUG_ADDR) "nowhere"`},
	} {
		if _, err := Load("", env(map[string]string{tc.env: tc.val})); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load with %s=%s = %v; want %q", tc.env, tc.val, err, tc.want)
		}
	}
}

// TestSettings_ExampleFile: configs/seckill.yaml, the commented example,
// lists every setting at its default, and a variable its comment names is
// that setting's.
func TestSettings_ExampleFile(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "seckill.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	comments := map[string]string{} // key -> its line's comment
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := strings.TrimPrefix(prefix+"."+n.Content[i].Value, ".")
			if v := n.Content[i+1]; v.Kind == yaml.MappingNode {
				walk(v, key)
			} else {
				comments[key] = n.Content[i].LineComment + v.LineComment
			}
		}
	}
	walk(doc.Content[0], "")
	file, err := Load(path, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	def := Default()
	for _, s := range Settings() {
		comment, ok := comments[s.Key]
		if !ok {
			t.Errorf("configs/seckill.yaml does not list %s: add it with its default and %s", s.Key, s.Env)
			continue
		}
		got, want := file.field(s), def.field(s)
		if empty := got.Kind() == reflect.Slice && got.Len()+want.Len() == 0; !empty && !reflect.DeepEqual(got.Interface(), want.Interface()) {
			t.Errorf("configs/seckill.yaml %s = %v; want the default %v", s.Key, got, want)
		}
		if i := strings.Index(comment, "SECKILL_"); i >= 0 {
			if named := strings.FieldsFunc(comment[i:], func(r rune) bool { return r != '_' && (r < 'A' || r > 'Z') && (r < '0' || r > '9') })[0]; named != s.Env {
				t.Errorf("configs/seckill.yaml %s names %s; its variable is %s", s.Key, named, s.Env)
			}
		}
	}
}

// TestSettings_DocTableCurrent: docs/configuration.md's settings table is
// the one the tags generate.
func TestSettings_DocTableCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := WithSettingsTable(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if want != string(raw) {
		t.Errorf("docs/configuration.md's settings table differs from the Config tags: run go generate ./internal/config")
	}
}

// TestSettings_BoundsAreWhatValidationAccepts: the bounds a setting
// reports (what the randomized tests draw from) are those its check
// enforces: both ends pass, one step beyond either fails.
func TestSettings_BoundsAreWhatValidationAccepts(t *testing.T) {
	n := 0
	for _, s := range Settings() {
		lo, hi, ok := s.Bounds()
		if !ok {
			continue
		}
		n++
		at := func(x float64) reflect.Value {
			v := reflect.New(s.Type()).Elem()
			if v.Kind() == reflect.Float64 {
				v.SetFloat(x)
			} else {
				v.SetInt(int64(x))
			}
			return v
		}
		step := 1.0
		for _, c := range []struct {
			x    float64
			pass bool
		}{{lo, true}, {lo - step, false}, {hi, true}, {hi + step, false}} {
			if math.IsInf(c.x, 0) {
				continue
			}
			if err := check(at(c.x), s.valid); (err == nil) != c.pass {
				t.Errorf("%s (valid %q, bounds %v..%v): check(%v) = %v; want pass %v", s.Key, s.valid, lo, hi, c.x, err, c.pass)
			}
		}
	}
	if n < 30 {
		t.Errorf("%d settings report bounds; want every numeric one with a valid tag", n)
	}
}

// TestSettings_SecretsAreMarked: a setting whose help promises it is never
// logged is a credential, and says so with its secret tag, which the
// Kubernetes manifests' test reads to keep it out of the ConfigMap.
func TestSettings_SecretsAreMarked(t *testing.T) {
	n := 0
	for _, s := range Settings() {
		if strings.Contains(s.Help, "never logged") && !s.Secret {
			t.Errorf("%s: help says never logged but it has no secret:\"true\" tag", s.Key)
		}
		if s.Secret {
			n++
		}
	}
	if n == 0 {
		t.Error("no setting is marked secret; want the DSN, passwords and tokens")
	}
}
