package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/lock/locktest"
)

// Topologies of the failover fault (Config.Redis).
const (
	RedisSentinel = "sentinel"
	RedisCluster  = "cluster"
)

// sentinelMaster is the master name the failover fault's sentinels monitor.
const sentinelMaster = "seckill"

// startSentinels starts the failover fault's Sentinel group: a master, two
// replicas and three sentinels (quorum 2), which declare the master down
// after 1s (5–30s in production: the selling gap scales with it).
func (r *run) startSentinels(ctx context.Context) error {
	g, err := locktest.StartSentinelGroup(ctx, r.work, locktest.SentinelOptions{
		Name: sentinelMaster, Replicas: 2, FailoverTimeout: 10 * time.Second, ParallelSyncs: 2})
	if err != nil {
		return err
	}
	r.stops = append(r.stops, g.Stop)
	r.sentinels, r.redisAddrs = g, g.SentinelAddrs()
	var replicas []string
	for _, p := range g.Replicas {
		replicas = append(replicas, p.Addr)
	}
	r.event("sentinel group ready: master %s, replicas %s, sentinels %s", g.Master.Addr,
		strings.Join(replicas, " "), strings.Join(r.redisAddrs, " "))
	return nil
}

// startCluster starts the failover fault's Redis Cluster: three masters
// with a replica each; the instances get the masters as seed nodes.
func (r *run) startCluster(ctx context.Context) error {
	c, err := locktest.StartCluster(ctx, r.work, 3, 1)
	if err != nil {
		return err
	}
	r.stops = append(r.stops, c.Stop)
	r.cluster, r.redisAddrs = c, c.Addrs()[:3]
	r.event("redis cluster ready: %s", strings.Join(c.Addrs(), " "))
	return nil
}

// failover SIGKILLs the master and waits until Sentinel has promoted a
// replica. The old master stays down: the sale goes on without it.
func (r *run) failover(ctx context.Context) error {
	if r.cluster != nil {
		return r.clusterFailover(ctx)
	}
	master := r.sentinels.Master
	return r.strike("redis-server-0 (Sentinel master)", "SIGKILL the master "+master.Addr, func() (string, error) {
		master.Kill()
		_, err := r.sentinels.AwaitMaster(ctx, master.Addr, 90*time.Second)
		return "a replica promoted", err
	})
}

// skuKey is the hash tag of a SKU's keys.
func skuKey(id int64) string { return "{sku:" + strconv.FormatInt(id, 10) + "}" }

// clusterFailover SIGKILLs the master of the sale's (first) SKU and waits
// until the cluster has promoted its replica and is ok again. The old
// master stays down.
func (r *run) clusterFailover(ctx context.Context) error {
	old, err := r.cluster.SlotMaster(ctx, skuKey(r.skuID))
	if err != nil {
		return err
	}
	i := slices.Index(r.cluster.Addrs(), old)
	if i < 0 {
		return fmt.Errorf("the SKU's master %s is none of the run's nodes", old)
	}
	on := 0
	for _, id := range r.skuIDs {
		addr, err := r.cluster.SlotMaster(ctx, skuKey(id))
		if err != nil {
			return err
		}
		if addr == old {
			on++
		}
	}
	victims := fmt.Sprintf("redis-server-%d (the Cluster master of %d of the %d SKUs)", i, on, len(r.skuIDs))
	what := fmt.Sprintf("SIGKILL the cluster master %s of sku %d and %d other(s) of %d", old, r.skuID, on-1, len(r.skuIDs))
	return r.strike(victims, what, func() (string, error) {
		r.cluster.Nodes[i].Kill()
		_, err := r.cluster.AwaitSlotMaster(ctx, skuKey(r.skuID), old, 90*time.Second)
		return "the cluster promoted a replica", err
	})
}
