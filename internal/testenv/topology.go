package testenv

import (
	"testing"

	"github.com/seckill/seckill/lock/locktest"
)

// RedisProc is a private redis-server (or redis-server --sentinel).
type RedisProc = locktest.RedisProc

// SentinelGroup is a master, replicas that replicate through a Proxy each
// (Links, which a test can Freeze), and three sentinels with quorum 2.
type SentinelGroup = locktest.SentinelGroup

// Cluster is a Redis Cluster of private redis-servers.
type Cluster = locktest.Cluster

// StartSentinelGroup starts the group under the master name "seckill" and
// waits until every sentinel knows the other two and every replica is in
// sync; it is stopped when the test ends.
func StartSentinelGroup(t testing.TB, replicas int) *SentinelGroup {
	t.Helper()
	return locktest.StartSentinelGroupT(t, locktest.SentinelOptions{Name: "seckill", Replicas: replicas, Links: true})
}

// StartCluster starts masters*(1+replicas) nodes with cluster mode on,
// joined and ok, stopped when the test ends.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	return locktest.StartClusterT(t, masters, replicas)
}
