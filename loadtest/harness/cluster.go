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

// client is a Cluster client of the live nodes, for the runner's own
// questions.
func (c *clusterSetup) client() *redis.ClusterClient {
	var live []string
	for i, a := range c.addrs {
		if up, _ := c.procs[i].running(); up {
			live = append(live, a)
		}
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: live, MaxRetries: -1})
}

// skuKey is the hash tag of a SKU's keys.
func skuKey(id int64) string { return "{sku:" + strconv.FormatInt(id, 10) + "}" }

// skusOn counts the SKUs whose slots master serves.
func (c *clusterSetup) skusOn(ctx context.Context, master string, ids []int64) (int, error) {
	cc := c.client()
	defer cc.Close()
	n := 0
	for _, id := range ids {
		node, err := cc.MasterForKey(ctx, skuKey(id))
		if err != nil {
			return 0, err
		}
		if node.Options().Addr == master {
			n++
		}
	}
	return n, nil
}

// master returns the node serving the sale's SKU (its hash tag {sku:N}),
// as the cluster's live nodes see it.
func (c *clusterSetup) master(ctx context.Context, skuID int64) (string, error) {
	cc := c.client()
	defer cc.Close()
	node, err := cc.MasterForKey(ctx, skuKey(skuID))
	if err != nil {
		return "", err
	}
	role, err := node.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		return "", fmt.Errorf("%s: role %v, %v", node.Options().Addr, role, err)
	}
	return node.Options().Addr, nil
}

// clusterFailover SIGKILLs the master of the sale's (first) SKU and waits until the
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
	on, err := r.cluster.skusOn(ctx, old, r.skuIDs)
	if err != nil {
		return err
	}
	victim := r.cluster.procs[i]
	m.victims = fmt.Sprintf("%s (the Cluster master of %d of the %d SKUs)", victim.name, on, len(r.skuIDs))
	m.faultStart = time.Now()
	r.event("FAULT: SIGKILL the cluster master %s of sku %d and %d other(s) of %d (sold %d of %d)",
		old, r.skuID, on-1, len(r.skuIDs), m.faultSold, r.cfg.Stock)
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
