package harness

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/toolchain"
)

// normalize fills cfg's zero values with the defaults and refuses a
// configuration that cannot run, before anything is started.
func normalize(cfg Config) (Config, error) {
	cfg = withDefaults(cfg)
	for _, check := range []func(Config) error{checkSale, checkTarget, checkRedis, checkFaults, validateLock} {
		if err := check(cfg); err != nil {
			return cfg, err
		}
	}
	root, err := toolchain.ModuleRoot(".")
	if err != nil {
		return cfg, err
	}
	cfg.moduleRoot = root
	return cfg, nil
}

// orDefault sets *v to def when it is zero.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// withDefaults fills what the rest of cfg implies: the SKUs (more on
// Redis Cluster), the latency bounds (slower in a fault run: the degraded
// path and the retries) and a nil Log.
func withDefaults(cfg Config) Config {
	skus, p95, p99 := 1, 1500*time.Millisecond, 3*time.Second
	if cfg.Redis == RedisCluster {
		skus = DefaultClusterSKUs
	}
	if cfg.Fault != FaultNone {
		p95, p99 = 3*time.Second, 6*time.Second
	}
	orDefault(&cfg.SKUs, skus)
	orDefault(&cfg.P95, p95)
	orDefault(&cfg.P99, p99)
	orDefault(&cfg.Log, io.Discard)
	return cfg
}

// checkSale refuses a sale that cannot be run: an unknown fault, numbers
// out of range.
func checkSale(cfg Config) error {
	switch {
	case !slices.Contains(Faults, cfg.Fault):
		return fmt.Errorf("fault %q: want one of %s", cfg.Fault, strings.Join(Faults, ", "))
	case cfg.Instances < 1 || cfg.Instances > 16:
		return fmt.Errorf("instances %d: want 1 to 16", cfg.Instances)
	case cfg.Stock < 1:
		return fmt.Errorf("stock %d: want at least 1", cfg.Stock)
	case cfg.SKUs < 1 || cfg.SKUs > 1000 || int64(cfg.SKUs) > cfg.Stock:
		return fmt.Errorf("skus %d: want 1 to 1000, and no more than -stock (%d)", cfg.SKUs, cfg.Stock)
	case cfg.SKUs > 1 && (cfg.Target || cfg.Restocks > 0):
		return errors.New("-skus above 1 needs the runner's own database and no -restocks")
	case cfg.FaultAt < 0 || cfg.FaultAt >= 1:
		return fmt.Errorf("fault-at %v: want a share of the stock in [0, 1)", cfg.FaultAt)
	}
	return nil
}

// checkTarget refuses a target run without what it needs to reach and
// check the deployment, or with a fault it cannot inject.
func checkTarget(cfg Config) error {
	switch {
	case cfg.Target && (len(cfg.BaseURLs) == 0 || len(cfg.AdminToken) < 16):
		return errors.New("target mode needs base URLs and the admin token (16+ characters)")
	case cfg.Target && cfg.Fault != FaultNone:
		return errors.New("target mode cannot inject faults into a deployment it did not start")
	}
	return nil
}

// checkRedis refuses a Redis topology or address list the fault cannot
// run with.
func checkRedis(cfg Config) error {
	switch {
	case cfg.Redis != "" && cfg.Redis != RedisSentinel && cfg.Redis != RedisCluster:
		return fmt.Errorf("redis %q: want %s or %s", cfg.Redis, RedisSentinel, RedisCluster)
	case cfg.Redis != "" && cfg.Fault != FaultFailover && cfg.Fault != FaultNone:
		return errors.New("-redis sentinel|cluster is the failover fault's topology: use it with -fault failover (or none)")
	case cfg.Fault == FaultFailover && len(cfg.RedisAddrs) > 0:
		return errors.New("the failover fault starts its own master, replicas and sentinels: do not pass Redis addresses with it")
	case cfg.Fault == FaultRedis && len(cfg.RedisAddrs) > 0:
		return errors.New("the redis fault kills the runner's own redis-server: do not pass Redis addresses with it")
	case cfg.RedisServers < 1 || cfg.RedisServers > 7 || cfg.RedisKill < 1 || cfg.RedisKill > cfg.RedisServers:
		return fmt.Errorf("redis-servers %d, redis-kill %d: want 1 to 7 servers and 1 to all of them killed", cfg.RedisServers, cfg.RedisKill)
	}
	return nil
}

// checkFaults refuses a fault the run's servers cannot take.
func checkFaults(cfg Config) error {
	switch {
	case cfg.Fault == FaultMySQLFailover && (cfg.MySQLMinReplicas < 0 || cfg.MySQLMinReplicas > 2):
		return fmt.Errorf("mysql-min-replicas %d: the mysql-failover fault has 2 replicas: want 0 to 2", cfg.MySQLMinReplicas)
	case cfg.Fault == FaultInstance && cfg.Instances < 2:
		return errors.New("the instance fault needs at least 2 instances")
	case cfg.Fault == FaultBroker && (!cfg.Events || cfg.Target):
		return errors.New("the broker fault kills the runner's own nats-server: it needs -events, and no -target")
	}
	return nil
}

// resultsDir is where every run's directory goes, loadtest/results.
func (c Config) resultsDir() string { return filepath.Join(c.moduleRoot, "loadtest", "results") }
