package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/seckill/seckill/loadtest/harness"
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
	started map[string]*harness.Topology
}

func newTopologies(dir string) *topologies {
	return &topologies{dir: dir, started: map[string]*harness.Topology{}}
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
		if tp, err = harness.StartTopology(ctx, c.topology, dir, io.Discard); err != nil {
			return nil, fmt.Errorf("redis %s: %w", c.topology, err)
		}
		t.started[c.topology] = tp
	}
	env := append([]string(nil), tp.Env...)
	if c.minReplicas > 0 {
		env = append(env, "SECKILL_LOCK_MIN_REPLICAS="+strconv.Itoa(c.minReplicas))
	}
	return env, nil
}

func (t *topologies) stop() {
	for _, tp := range t.started {
		tp.Stop()
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
