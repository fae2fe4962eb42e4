package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Lock backends (lock.backend).
const (
	BackendRedis     = "redis"
	BackendZooKeeper = "zookeeper"
)

// ZooKeeper configures the ZooKeeper lock backend (lock.backend:
// zookeeper), which also keeps the shared sold-out marks: the service then
// runs without Redis.
type ZooKeeper struct {
	Addrs []string `yaml:"addrs"` // the ensemble's client addresses, host:port
	// SessionTimeout is the lease: a holder cut off or paused for longer
	// loses its lock nodes. The server clamps it to [2, 20] tickTimes
	// ([4s, 40s] with the default tickTime of 2s).
	SessionTimeout time.Duration `yaml:"session_timeout"` // default 6s
	// Root is the path under which the service keeps locks/ and soldout/.
	Root string `yaml:"root"` // default /seckill
}

func (c *Config) applyZooKeeperEnv(getenv func(string) string) error {
	if v := getenv("SECKILL_LOCK_BACKEND"); v != "" {
		c.Lock.Backend = v
	}
	if v := getenv("SECKILL_ZOOKEEPER_ADDRS"); v != "" {
		c.ZooKeeper.Addrs = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.ZooKeeper.Addrs = append(c.ZooKeeper.Addrs, a)
			}
		}
	}
	if v := getenv("SECKILL_ZOOKEEPER_SESSION_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_ZOOKEEPER_SESSION_TIMEOUT=%q: not a duration", v)
		}
		c.ZooKeeper.SessionTimeout = d
	}
	if v := getenv("SECKILL_ZOOKEEPER_ROOT"); v != "" {
		c.ZooKeeper.Root = v
	}
	return nil
}

func (c Config) validateZooKeeper() error {
	switch c.Lock.Backend {
	case BackendRedis:
		return nil
	case BackendZooKeeper:
	default:
		return fmt.Errorf("config: lock.backend %q: want %s or %s", c.Lock.Backend, BackendRedis, BackendZooKeeper)
	}
	if len(c.ZooKeeper.Addrs) == 0 {
		return errors.New("config: zookeeper.addrs (SECKILL_ZOOKEEPER_ADDRS) is required with lock.backend zookeeper")
	}
	for _, a := range c.ZooKeeper.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("config: zookeeper.addrs %q: %v", a, err)
		}
	}
	if c.ZooKeeper.SessionTimeout < time.Second {
		return errors.New("config: zookeeper.session_timeout must be at least 1s")
	}
	if !strings.HasPrefix(c.ZooKeeper.Root, "/") || len(c.ZooKeeper.Root) < 2 || strings.HasSuffix(c.ZooKeeper.Root, "/") {
		return fmt.Errorf("config: zookeeper.root %q: want an absolute path such as /seckill", c.ZooKeeper.Root)
	}
	if c.Embedded() {
		return errors.New("config: lock.backend zookeeper needs mysql.dsn: the quick start is embedded Redis and SQLite only")
	}
	return nil
}
