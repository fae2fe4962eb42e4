package locktest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions shape a SentinelGroup.
type SentinelOptions struct {
	Name     string // the master's name; default "locktest"
	Replicas int    // replicas of the master
	// Links puts a Proxy between each replica and the master (Links),
	// which a test can Freeze to make the replica deaf to the master.
	Links bool
	// FailoverTimeout is Sentinel's failover-timeout, default 60s. It also
	// delays Sentinel's "fix" of a replica whose master port differs from
	// the monitored one (a replica behind a link), so with Links it stays
	// well above a test's run time; it is otherwise only the retry delay
	// (twice as long) after a split vote.
	FailoverTimeout time.Duration
	ParallelSyncs   int // Sentinel's parallel-syncs, default 1
}

// SentinelGroup is a master, its replicas and three sentinels with quorum
// 2, which declare the master down after 1s without an answer.
type SentinelGroup struct {
	Name      string
	Master    *RedisProc
	Replicas  []*RedisProc
	Links     []*Proxy // with Links, the replicas' paths to the master
	Sentinels []*RedisProc
}

// StartSentinelGroup starts the group, its files under dir, and waits
// until every sentinel knows the other two and every replica is in sync,
// so that a failover can be authorised as soon as the master dies.
func StartSentinelGroup(ctx context.Context, dir string, o SentinelOptions) (*SentinelGroup, error) {
	if o.Name == "" {
		o.Name = "locktest"
	}
	g := &SentinelGroup{Name: o.Name}
	if err := g.start(ctx, dir, o); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

func (g *SentinelGroup) start(ctx context.Context, dir string, o SentinelOptions) error {
	var err error
	if g.Master, err = StartRedis(ctx, dir); err != nil {
		return err
	}
	for range o.Replicas {
		host, port := "127.0.0.1", strconv.Itoa(g.Master.Port)
		if o.Links {
			link, err := NewProxy(g.Master.Addr, nil)
			if err != nil {
				return err
			}
			g.Links = append(g.Links, link)
			host, port, _ = net.SplitHostPort(link.Addr)
		}
		r, err := StartRedis(ctx, dir, "--replicaof", host, port)
		if err != nil {
			return err
		}
		g.Replicas = append(g.Replicas, r)
	}
	for range 3 {
		s, err := startSentinel(ctx, dir, g.Master.Port, o)
		if err != nil {
			return err
		}
		g.Sentinels = append(g.Sentinels, s)
	}
	return Poll(ctx, "sentinel group (logs in "+dir+")", 60*time.Second, 50*time.Millisecond, g.settled)
}

// StartSentinelGroupT is StartSentinelGroup in the test's temporary
// directory, stopped when the test ends.
func StartSentinelGroupT(t testing.TB, o SentinelOptions) *SentinelGroup {
	t.Helper()
	g, err := StartSentinelGroup(context.Background(), t.TempDir(), o)
	must(t, err)
	t.Cleanup(g.Stop)
	return g
}

// startSentinel starts redis-server --sentinel monitoring the master on
// port under o.Name.
func startSentinel(ctx context.Context, dir string, port int, o SentinelOptions) (*RedisProc, error) {
	timeout := cmp.Or(o.FailoverTimeout, time.Minute)
	return startRedis(ctx, dir, func(p *RedisProc) ([]string, error) {
		conf := strings.Join([]string{
			"port " + strconv.Itoa(p.Port),
			"bind 127.0.0.1",
			"dir " + p.Dir,
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", o.Name, port),
			fmt.Sprintf("sentinel down-after-milliseconds %s 1000", o.Name),
			fmt.Sprintf("sentinel failover-timeout %s %d", o.Name, timeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s %d", o.Name, cmp.Or(o.ParallelSyncs, 1)),
		}, "\n") + "\n"
		file := filepath.Join(p.Dir, "sentinel.conf")
		return []string{file, "--sentinel"}, os.WriteFile(file, []byte(conf), 0o600)
	})
}

func (g *SentinelGroup) settled(ctx context.Context) error {
	for _, r := range g.Replicas {
		c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
		info, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica %s not in sync: %v", r.Addr, err)
		}
	}
	for _, s := range g.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		peers, err1 := c.Sentinels(ctx, g.Name).Result()
		reps, err2 := c.Replicas(ctx, g.Name).Result()
		c.Close()
		if err1 != nil || err2 != nil || len(peers) != len(g.Sentinels)-1 || len(reps) != len(g.Replicas) {
			return fmt.Errorf("sentinel %s knows %d sentinels and %d replicas (%v, %v)", s.Addr, len(peers), len(reps), err1, err2)
		}
		for _, r := range reps {
			if r["flags"] != "slave" || r["master-link-status"] != "ok" {
				return fmt.Errorf("sentinel %s: replica %s:%s flags %s link %s", s.Addr, r["ip"], r["port"], r["flags"], r["master-link-status"])
			}
		}
	}
	return nil
}

// SentinelAddrs returns the sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string { return addrs(g.Sentinels) }

func addrs(ps []*RedisProc) []string {
	var a []string
	for _, p := range ps {
		a = append(a, p.Addr)
	}
	return a
}

// Stop kills every process of the group and closes its links.
func (g *SentinelGroup) Stop() {
	for _, p := range append(append([]*RedisProc{g.Master}, g.Replicas...), g.Sentinels...) {
		if p != nil {
			p.Kill()
		}
	}
	for _, l := range g.Links {
		l.Close()
	}
}

// AwaitMaster waits, at most timeout, until every live sentinel names the
// same master, other than old, and that server answers ROLE as a master;
// it returns the master's address.
func (g *SentinelGroup) AwaitMaster(ctx context.Context, old string, timeout time.Duration) (string, error) {
	var named []string
	err := Poll(ctx, "failover from "+old, timeout, 50*time.Millisecond, func(ctx context.Context) error {
		named = named[:0]
		for _, s := range g.Sentinels {
			if !s.Alive() {
				continue
			}
			c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
			hp, err := c.GetMasterAddrByName(ctx, g.Name).Result()
			c.Close()
			if err == nil && len(hp) == 2 {
				named = append(named, net.JoinHostPort(hp[0], hp[1]))
			}
		}
		if len(named) == 0 || slices.Contains(named, old) || slices.ContainsFunc(named, func(a string) bool { return a != named[0] }) {
			return fmt.Errorf("sentinels name %v (logs in %s)", named, g.Sentinels[0].Dir)
		}
		// The sentinels switch their config once the promoted replica
		// reports role master; make sure it accepts writes.
		return isMaster(ctx, named[0])
	})
	if err != nil {
		return "", err
	}
	return named[0], nil
}

// WaitForMaster is AwaitMaster failing the test.
func (g *SentinelGroup) WaitForMaster(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	m, err := g.AwaitMaster(context.Background(), old, timeout)
	must(t, err)
	return m
}

// isMaster returns nil when the server at addr answers ROLE as a master.
func isMaster(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		return fmt.Errorf("%s: role %v, %v", addr, role, err)
	}
	return nil
}

// Cluster is a Redis Cluster of private redis-servers.
type Cluster struct {
	Nodes []*RedisProc
}

// StartCluster starts masters*(1+replicas) nodes with cluster mode on,
// their files under dir, joins them with redis-cli --cluster create
// (slots spread evenly over the masters) and waits until every node
// reports cluster_state:ok and every replica is in sync.
func StartCluster(ctx context.Context, dir string, masters, replicas int) (*Cluster, error) {
	c := &Cluster{}
	if err := c.start(ctx, dir, masters, replicas); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, dir string, masters, replicas int) error {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return err
	}
	for range masters * (1 + replicas) {
		n, err := StartRedis(ctx, dir, "--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
			"--cluster-config-file", "nodes.conf")
		if err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append(append([]string{"--cluster", "create"}, c.Addrs()...),
		"--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	return Poll(ctx, "Redis Cluster (logs in "+dir+")", time.Minute, 50*time.Millisecond, c.OK)
}

// StartClusterT is StartCluster in the test's temporary directory,
// stopped when the test ends.
func StartClusterT(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	c, err := StartCluster(context.Background(), t.TempDir(), masters, replicas)
	must(t, err)
	t.Cleanup(c.Stop)
	return c
}

// OK returns nil once every live node reports cluster_state:ok and no
// replica is still syncing (one could not acknowledge a WAIT).
func (c *Cluster) OK(ctx context.Context) error {
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		info, err := rc.ClusterInfo(ctx).Result()
		repl, err2 := rc.Info(ctx, "replication").Result()
		rc.Close()
		switch {
		case err != nil || err2 != nil:
			return fmt.Errorf("%s: %v %v", n.Addr, err, err2)
		case !strings.Contains(info, "cluster_state:ok"):
			return fmt.Errorf("%s: cluster not ok", n.Addr)
		case strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up"):
			return fmt.Errorf("%s: replica not in sync", n.Addr)
		}
	}
	return nil
}

// Addrs returns every node's address (seed nodes for a ClusterClient).
func (c *Cluster) Addrs() []string { return addrs(c.Nodes) }

// Node returns the cluster's node at addr, nil if none.
func (c *Cluster) Node(addr string) *RedisProc {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// SlotMaster returns the master a live node maps key's slot to, once
// that master answers ROLE as a master.
func (c *Cluster) SlotMaster(ctx context.Context, key string) (string, error) {
	err := fmt.Errorf("no live node (logs in %s)", c.Nodes[0].Dir)
	for _, n := range c.Nodes {
		if n.Alive() {
			var addr string
			if addr, err = slotMaster(ctx, n.Addr, key); err == nil {
				return addr, nil
			}
		}
	}
	return "", err
}

func slotMaster(ctx context.Context, node, key string) (string, error) {
	rc := redis.NewClient(&redis.Options{Addr: node, MaxRetries: -1})
	slot, err := rc.ClusterKeySlot(ctx, key).Result()
	var shards []redis.ClusterShard
	if err == nil {
		shards, err = rc.ClusterShards(ctx).Result()
	}
	rc.Close()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
			continue
		}
		for _, m := range sh.Nodes {
			addr := net.JoinHostPort(m.IP, strconv.FormatInt(m.Port, 10))
			if m.Role == "master" && m.Health == "online" && isMaster(ctx, addr) == nil {
				return addr, nil
			}
		}
	}
	return "", fmt.Errorf("%s: no master of %q's slot", node, key)
}

// AwaitSlotMaster waits, at most timeout, until key's slot is served by a
// master other than old and the cluster is ok again, and returns it.
func (c *Cluster) AwaitSlotMaster(ctx context.Context, key, old string, timeout time.Duration) (string, error) {
	var addr string
	err := Poll(ctx, fmt.Sprintf("a new master for %q", key), timeout, 50*time.Millisecond, func(ctx context.Context) error {
		var err error
		if addr, err = c.SlotMaster(ctx, key); err != nil {
			return err
		}
		if addr == old {
			return fmt.Errorf("%q still served by %s", key, old)
		}
		return c.OK(ctx)
	})
	return addr, err
}

// WaitForSlotMaster is AwaitSlotMaster failing the test.
func (c *Cluster) WaitForSlotMaster(t testing.TB, key, old string, timeout time.Duration) string {
	t.Helper()
	addr, err := c.AwaitSlotMaster(context.Background(), key, old, timeout)
	must(t, err)
	return addr
}
