package harness

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSetup is the failover fault's Redis Cluster: three masters and
// three replicas, private redis-servers without persistence.
type clusterSetup struct {
	addrs []string
	procs []*proc
}

// startCluster starts six cluster nodes, joins them with redis-cli
// --cluster create (one replica per master) and waits until every node
// reports cluster_state:ok and every replica is in sync.
func (r *run) startCluster(ctx context.Context) error {
	c := &clusterSetup{}
	args := []string{"--cluster", "create"}
	for i := range 6 {
		p, addr, err := startRedis(ctx, &r.ps, r.work, i, "--cluster-enabled", "yes",
			"--cluster-node-timeout", "1000", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i))
		if err != nil {
			return err
		}
		r.redis = append(r.redis, p)
		c.procs, c.addrs = append(c.procs, p), append(c.addrs, addr)
		args = append(args, addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := poll(ctx, "Redis Cluster", 60*time.Second, 100*time.Millisecond, c.ok); err != nil {
		return err
	}
	r.cluster, r.redisAddrs = c, c.addrs[:3]
	r.event("redis cluster ready: %s", strings.Join(c.addrs, " "))
	return nil
}

// ok reports nil once every live node says cluster_state:ok and no replica
// is still syncing.
func (c *clusterSetup) ok(ctx context.Context) error {
	for i, a := range c.addrs {
		if up, _ := c.procs[i].running(); !up {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		info, err := rc.ClusterInfo(ctx).Result()
		repl, err2 := rc.Info(ctx, "replication").Result()
		rc.Close()
		switch {
		case err != nil || err2 != nil:
			return fmt.Errorf("%s: %v %v", a, err, err2)
		case !strings.Contains(info, "cluster_state:ok"):
			return fmt.Errorf("%s: cluster not ok", a)
		case strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up"):
			return fmt.Errorf("%s: replica not in sync", a)
		}
	}
	return nil
}

// master returns the node serving the sale's SKU (its hash tag {sku:N}),
// as the cluster's live nodes see it.
func (c *clusterSetup) master(ctx context.Context, skuID int64) (string, error) {
	var live []string
	for i, a := range c.addrs {
		if up, _ := c.procs[i].running(); up {
			live = append(live, a)
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: live, MaxRetries: -1})
	defer cc.Close()
	node, err := cc.MasterForKey(ctx, "{sku:"+strconv.FormatInt(skuID, 10)+"}")
	if err != nil {
		return "", err
	}
	role, err := node.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		return "", fmt.Errorf("%s: role %v, %v", node.Options().Addr, role, err)
	}
	return node.Options().Addr, nil
}

// clusterFailover SIGKILLs the master of the sale's SKU and waits until the
// cluster has promoted its replica and is ok again. The old master stays
// down.
func (r *run) clusterFailover(ctx context.Context) error {
	m := &r.monitor
	old, err := r.cluster.master(ctx, r.skuID)
	if err != nil {
		return err
	}
	i := -1
	for j, a := range r.cluster.addrs {
		if a == old {
			i = j
		}
	}
	if i < 0 {
		return fmt.Errorf("the SKU's master %s is none of the run's nodes", old)
	}
	victim := r.cluster.procs[i]
	m.victims = victim.name + " (the SKU's Cluster master)"
	m.faultStart = time.Now()
	r.event("FAULT: SIGKILL the SKU's cluster master %s (sold %d of %d)", old, m.faultSold, r.cfg.Stock)
	if err := victim.kill(); err != nil {
		return err
	}
	promoted := func(ctx context.Context) error {
		if err := r.cluster.ok(ctx); err != nil {
			return err
		}
		addr, err := r.cluster.master(ctx, r.skuID)
		if err == nil && addr == old {
			return fmt.Errorf("the SKU's slot still served by %s", old)
		}
		return err
	}
	if err := poll(ctx, "Cluster failover", 90*time.Second, 50*time.Millisecond, promoted); err != nil {
		return err
	}
	m.faultBack = time.Now()
	r.event("FAULT: the cluster promoted a replica %.1fs after the master died", m.faultBack.Sub(m.faultStart).Seconds())
	return nil
}
