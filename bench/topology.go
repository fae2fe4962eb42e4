package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/loadtest/harness"
	"github.com/seckill/seckill/lock/locktest"
)

// Cases of the production Redis topologies: the locked strategy on a
// Sentinel-managed master (with and without lock.min_replicas 1) and on a
// Cluster, each next to a standalone "locked" run of the same load, so the
// ratios to standalone come from one run.
const (
	caseStandalone       = "locked, standalone" // the same as "locked", beside the topology rows
	caseSentinel         = "locked, Sentinel"
	caseSentinelReplicas = "locked, Sentinel, min_replicas 1"
	caseCluster          = "locked, Cluster"
)

// topologyCases are the topology rows, each between standalone runs of
// "locked": the ratios take the standalone runs' mean, so a machine that
// drifts during the run moves both sides.
func topologyCases(vus int) []benchCase {
	locked := benchCase{name: caseStandalone, strategy: "locked", vus: vus, skus: 1}
	return []benchCase{
		locked,
		{name: caseSentinel, strategy: "locked", vus: vus, skus: 1, topology: harness.RedisSentinel},
		locked,
		{name: caseSentinelReplicas, strategy: "locked", vus: vus, skus: 1, topology: harness.RedisSentinel, minReplicas: 1},
		locked,
		{name: caseCluster, strategy: "locked", vus: vus, skus: 1, topology: harness.RedisCluster},
		locked,
	}
}

// topologies starts each topology the first time a case needs it and
// keeps it for the rest of the run (every case has its own key prefix).
type topologies struct {
	dir     string
	started map[string]*topology
}

// topology is a running Sentinel group or Cluster: the service's Redis
// settings for it (SECKILL_REDIS_ADDRS, SECKILL_REDIS_MODE and, with
// Sentinel, the master's name) and how to stop it.
type topology struct {
	env  []string
	stop func()
}

func newTopologies(dir string) *topologies {
	return &topologies{dir: dir, started: map[string]*topology{}}
}

// startTopology starts the load test's failover topologies: a master, two
// replicas and three sentinels, or three masters with a replica each.
func startTopology(ctx context.Context, kind, dir string) (*topology, error) {
	if kind == harness.RedisCluster {
		c, err := locktest.StartCluster(ctx, dir, 3, 1)
		if err != nil {
			return nil, err
		}
		return &topology{[]string{"SECKILL_REDIS_ADDRS=" + strings.Join(c.Addrs()[:3], ","), "SECKILL_REDIS_MODE=cluster"}, c.Stop}, nil
	}
	g, err := locktest.StartSentinelGroup(ctx, dir, locktest.SentinelOptions{
		Name: "seckill", Replicas: 2, FailoverTimeout: 10 * time.Second, ParallelSyncs: 2})
	if err != nil {
		return nil, err
	}
	return &topology{[]string{"SECKILL_REDIS_ADDRS=" + strings.Join(g.SentinelAddrs(), ","), "SECKILL_REDIS_MODE=sentinel",
		"SECKILL_REDIS_MASTER_NAME=" + g.Name}, g.Stop}, nil
}

// env returns the service's Redis settings of c: none for the standalone
// server, else the topology's, started if need be.
func (t *topologies) env(ctx context.Context, c benchCase) ([]string, error) {
	if c.topology == "" {
		return nil, nil
	}
	tp, ok := t.started[c.topology]
	if !ok {
		dir := filepath.Join(t.dir, "redis-"+c.topology)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		var err error
		if tp, err = startTopology(ctx, c.topology, dir); err != nil {
			return nil, fmt.Errorf("redis %s: %w", c.topology, err)
		}
		t.started[c.topology] = tp
	}
	env := append([]string(nil), tp.env...)
	if c.minReplicas > 0 {
		env = append(env, "SECKILL_LOCK_MIN_REPLICAS="+strconv.Itoa(c.minReplicas))
	}
	return env, nil
}

func (t *topologies) stop() {
	for _, tp := range t.started {
		tp.stop()
	}
}

// writeTopologyRatios adds the topology rows' ratios to standalone.
func writeTopologyRatios(w io.Writer, find finder, vus int) {
	locked := find(caseStandalone, vus)
	for _, name := range []string{caseSentinel, caseSentinelReplicas, caseCluster} {
		if r := find(name, vus); r != nil {
			fmt.Fprintf(w, "%s / standalone, orders/s @%d\t%s\t≥ 0.9×\n", name, vus, ratio(r, locked, orders))
			fmt.Fprintf(w, "%s / standalone, p99 @%d\t%s\t\n", name, vus, ratio(r, locked, p99))
		}
	}
}
