package testenv

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

// ZooKeeper is a private ZooKeeper: one standalone server or a quorum
// ensemble, each server a JVM on free loopback ports in the test's temp dir,
// killed when the test ends. The lock's own zktest starts it.
type ZooKeeper = zktest.ZooKeeper

// ZKServer is one server of a ZooKeeper.
type ZKServer = zktest.ZKServer

// StartZooKeeper starts a standalone server (tickTime 500ms: sessions of
// 1s to 10s), stopped when the test ends.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	return zktest.Start(t)
}

// StartZooKeeperEnsemble starts an ensemble of n servers (n odd, at least 3)
// and waits until every one of them serves, so one of them is the leader.
func StartZooKeeperEnsemble(t testing.TB, n int) *ZooKeeper {
	t.Helper()
	return zktest.StartEnsemble(t, n)
}

// ZooKeeperMissing says why a ZooKeeper server cannot start here (no java,
// or a jar of the classpath absent), or returns "" when it can. Tests of
// the ZooKeeper backend do not ask: they fail without it, as they must in
// CI; benchmarks skip with the reason.
func ZooKeeperMissing() string { return zktest.Missing() }

// ZKConn connects a ZooKeeper client to addrs with the given session
// timeout, waits (at most 30s) until it has a session, and closes it when
// the test ends. cb, if not nil, sees every event of the connection.
func ZKConn(t testing.TB, addrs []string, session time.Duration, cb zk.EventCallback) *zk.Conn {
	t.Helper()
	return zktest.Conn(t, addrs, session, cb)
}
