package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

// caseZooKeeper is the locked strategy on the ZooKeeper lock backend (a
// private standalone server, no Redis): measured right after the locked
// run on Redis, so that the machine's drift moves both.
const caseZooKeeper = "locked, zookeeper"

// needsZooKeeper reports whether a planned case runs on ZooKeeper.
func needsZooKeeper(cases []benchCase) bool {
	for _, c := range cases {
		if c.zk {
			return true
		}
	}
	return false
}

// startZooKeeper starts the standalone ZooKeeper of the zookeeper case,
// its data and log in the results directory.
func startZooKeeper(ctx context.Context, o *options) (*zktest.ZooKeeper, error) {
	z, err := zktest.StartServers(ctx, filepath.Join(o.out, "zookeeper"), zktest.Options{Servers: 1, TickTime: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("zookeeper (-zookeeper=false skips its case): %w", err)
	}
	o.zkAddrs = z.Addrs()
	return z, nil
}

// zkEnv puts an instance on the ZooKeeper lock backend: the lock and the
// shared sold-out marks in ZooKeeper, Redis unused.
func zkEnv(o options, i int) []string {
	return []string{
		"SECKILL_LOCK_BACKEND=zookeeper",
		"SECKILL_ZOOKEEPER_ADDRS=" + strings.Join(o.zkAddrs, ","),
		fmt.Sprintf("SECKILL_ZOOKEEPER_ROOT=/bench%d", i),
	}
}

// writeZooKeeperRatios adds the ZooKeeper backend's ratios to the Redis
// lock's, both with the locked strategy on one SKU.
func writeZooKeeperRatios(w io.Writer, zk, redis *row, vus int) {
	if zk == nil {
		return
	}
	fmt.Fprintf(w, "locked on zookeeper / on redis, orders/s @%d\t%s\t\n", vus, ratio(zk, redis, orders))
	fmt.Fprintf(w, "locked on zookeeper / on redis, p99 @%d\t%s\t\n", vus, ratio(zk, redis, p99))
}
