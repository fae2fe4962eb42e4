package harness

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Topology is a private Redis Sentinel group or Cluster started for
// another tool (the benchmark): the processes of the failover fault's
// setups, without a sale.
type Topology struct {
	// Env is the service's Redis settings for it (SECKILL_REDIS_ADDRS,
	// SECKILL_REDIS_MODE and, with Sentinel, the master's name).
	Env []string
	r   *run
}

// StartTopology starts kind (RedisSentinel: a master, two replicas and
// three sentinels; RedisCluster: three masters with a replica each) with
// its data in dir, and waits until it is settled.
func StartTopology(ctx context.Context, kind, dir string, log io.Writer) (*Topology, error) {
	if log == nil {
		log = io.Discard
	}
	r := &run{work: dir, log: log}
	var err error
	switch kind {
	case RedisSentinel:
		err = r.startSentinels(ctx)
	case RedisCluster:
		err = r.startCluster(ctx)
	default:
		err = fmt.Errorf("topology %q: want %s or %s", kind, RedisSentinel, RedisCluster)
	}
	t := &Topology{r: r}
	if err != nil {
		t.Stop()
		return nil, err
	}
	t.Env = append([]string{"SECKILL_REDIS_ADDRS=" + strings.Join(r.redisAddrs, ",")}, r.redisEnv()...)
	return t, nil
}

// Stop stops every process of the topology.
func (t *Topology) Stop() { t.r.ps.stopAll(15 * time.Second) }
