package app

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/repository"
)

var (
	_ handler.Readiness           = readiness{}
	_ handler.TopologyReporter    = readiness{}
	_ handler.ReplicationReporter = readiness{}
	_ handler.Readiness           = zkReadiness{}
)

// readiness implements handler.Readiness and handler.TopologyReporter.
type readiness struct {
	store   pinger
	redises []redis.UniversalClient
	mode    string
	watch   *sentinelWatch       // nil unless redis.mode is sentinel
	repl    *repository.Replicas // nil without mysql.replicas
}

// MySQLReplication implements handler.ReplicationReporter.
func (r readiness) MySQLReplication() any {
	if r.repl == nil {
		return nil
	}
	return r.repl.Status()
}

// RedisTopology names the mode and, with Sentinel, the current master and
// the master changes seen.
func (r readiness) RedisTopology(ctx context.Context) handler.Topology {
	t := handler.Topology{Mode: r.mode}
	if r.watch != nil {
		t.Master, t.Failovers, _ = r.watch.Master(ctx) // no answer: no master named
	}
	return t
}

func (r readiness) MySQL(ctx context.Context) error { return r.store.Ping(ctx) }

// ReplicasReady implements handler.ReplicationReporter.
func (r readiness) ReplicasReady() (bool, error) {
	if r.repl == nil || r.repl.Status().MinReplicas == 0 {
		return false, nil
	}
	return true, r.repl.Ready()
}

// Redis reports nil when a majority of the Redis nodes answer PING.
func (r readiness) Redis(ctx context.Context) error { return locking.PingRedis(ctx, r.redises) }

// zkReadiness reports the ZooKeeper session where the Redis readiness
// reports Redis: /readyz's "redis" field is the lock backend's state.
type zkReadiness struct {
	store pinger
	zk    *zooKeeper
}

func (r zkReadiness) MySQL(ctx context.Context) error { return r.store.Ping(ctx) }
func (r zkReadiness) Redis(ctx context.Context) error { return r.zk.Up(ctx) }
