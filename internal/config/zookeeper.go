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
	Addrs []string `yaml:"addrs" help:"the ensemble's client addresses, host:port, with lock.backend zookeeper"`
	// SessionTimeout is the lease: a holder cut off or paused for longer
	// loses its lock nodes. The server clamps it to [2, 20] tickTimes
	// ([4s, 40s] with the default tickTime of 2s).
	SessionTimeout time.Duration `yaml:"session_timeout" default:"6s" help:"the ZooKeeper lease, at least 1s; the server clamps it to 2..20 tickTimes"`
	Root           string        `yaml:"root" default:"/seckill" help:"the path under which locks/ and soldout/ are kept"`
}

func (c Config) validateZooKeeper() error {
	if c.Lock.Backend != BackendZooKeeper {
		return nil
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
