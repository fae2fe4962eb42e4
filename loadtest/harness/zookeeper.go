package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/lock/locktest"
	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

// Lock backends of the instances (Config.Lock).
const (
	LockRedis     = "redis"
	LockZooKeeper = "zookeeper" // a private 3-node ensemble; no Redis at all
)

// FaultZKLeader SIGKILLs the leader of the ZooKeeper ensemble (-lock
// zookeeper) and waits until the two survivors have elected another. The
// old leader stays down: the sale goes on with a bare quorum.
const FaultZKLeader = "zk-leader"

// startZooKeeper starts the run's 3-node ensemble with the production
// tick of zoo.cfg (2s: the service's default 6s session is within the
// server's [4s, 40s]).
func (r *run) startZooKeeper(ctx context.Context) error {
	z, err := zktest.StartServers(ctx, r.work, zktest.Options{Servers: 3, TickTime: 2 * time.Second})
	if err != nil {
		return err
	}
	r.stops = append(r.stops, z.Stop)
	r.zk = z
	r.event("zookeeper ensemble ready: %s", strings.Join(z.Addrs(), " "))
	return nil
}

// zkEnv is the ZooKeeper part of the instances' environment.
func (r *run) zkEnv() []string {
	return []string{
		"SECKILL_LOCK_BACKEND=zookeeper",
		"SECKILL_ZOOKEEPER_ADDRS=" + strings.Join(r.zk.Addrs(), ","),
		"SECKILL_ZOOKEEPER_ROOT=/seckill-lt-" + r.id,
	}
}

// zkLeaderFault SIGKILLs the ensemble's leader and waits until a survivor
// leads: the zxid fence (a new epoch) orders every lock granted after the
// election above every lock granted before it.
func (r *run) zkLeaderFault(ctx context.Context) error {
	old := r.zk.Leader()
	if old == nil {
		return errors.New("no zookeeper server leads")
	}
	elected := func(context.Context) error {
		l := r.zk.Leader()
		if l == nil {
			return errors.New("no zookeeper server leads")
		}
		for _, s := range r.zk.Servers {
			if s != l && s != old && s.Mode() == "" { // the follower must serve too
				return fmt.Errorf("zookeeper-%d not serving", s.ID)
			}
		}
		return nil
	}
	return r.strike(fmt.Sprintf("zookeeper-%d (ZooKeeper leader)", old.ID), "SIGKILL the ZooKeeper leader "+old.Addr, func() (string, error) {
		old.Stop()
		return "a survivor leads", locktest.Poll(ctx, "ZooKeeper election", 90*time.Second, 50*time.Millisecond, elected)
	})
}

// validateLock checks the lock backend against the fault and the Redis
// options, which mean nothing without Redis.
func validateLock(cfg Config) error {
	switch {
	case cfg.Lock != LockRedis && cfg.Lock != LockZooKeeper:
		return fmt.Errorf("lock %q: want %s or %s", cfg.Lock, LockRedis, LockZooKeeper)
	case cfg.Fault == FaultZKLeader && cfg.Lock != LockZooKeeper:
		return errors.New("the zk-leader fault kills the ZooKeeper leader: use it with -lock zookeeper")
	case cfg.Lock == LockZooKeeper && cfg.Target:
		return errors.New("-lock zookeeper starts its own ensemble: not in target mode")
	case cfg.Lock == LockZooKeeper && (cfg.Fault == FaultRedis || cfg.Fault == FaultFailover || cfg.Redis != "" ||
		len(cfg.RedisAddrs) > 0 || cfg.RedisServers > 1):
		return errors.New("-lock zookeeper runs the service without Redis: no Redis fault, topology or address")
	}
	return nil
}
