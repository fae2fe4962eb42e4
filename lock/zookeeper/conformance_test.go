package zookeeper_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock/internal/conformance"
	"github.com/seckill/seckill/lock/locktest"
	"github.com/seckill/seckill/lock/zookeeper"
	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

// TestConformance runs the lock contract (lock/internal/conformance), the
// one the Redis backends meet in package lock's TestConformance, against a
// three-server ZooKeeper ensemble.
func TestConformance(t *testing.T) {
	conformance.Run(t, zooKeeperBackend(t))
}

// ensembleOpTimeout bounds each request of the suite's clients in place
// of the 1s default. A write to the three-JVM ensemble needs two of them,
// and on a 2-core box running the suite under -race one write has taken
// longer than 1s (twice in CI, once with busy CPUs: "no answer within
// 1s", two Obtains of MutualExclusion failing together), though never
// when the package ran alone; the suite checks the contract, not
// ZooKeeper's latency. TestZooKeeper_UnavailableFailsFast holds the
// default's bound, and each clause's context (a minute) bounds the wait.
const ensembleOpTimeout = 20 * time.Second

// zkLocker adapts a *zookeeper.Client to the suite.
type zkLocker struct{ *zookeeper.Client }

func (c zkLocker) Obtain(ctx context.Context, key string) (conformance.Held, error) {
	l, err := c.Client.Obtain(ctx, key)
	if err != nil {
		return nil, err
	}
	return zkHeld{l}, nil
}

func (c zkLocker) List(ctx context.Context) ([]string, error) { return c.Keys(ctx, 1000) }

// zkHeld is a held ZooKeeper lock; its token is its node's name.
type zkHeld struct{ *zookeeper.Lock }

func (l zkHeld) Token() string {
	n := l.Node()
	return n[strings.LastIndexByte(n, '/')+1:]
}

func zooKeeperBackend(t *testing.T) conformance.Backend {
	if why := zktest.Missing(); why != "" {
		t.Skip(why)
	}
	z := zktest.StartEnsemble(t, 3)
	root := "/" + locktest.Name("conformance")
	admin := zktest.Conn(t, z.Addrs(), zkSession, nil)
	const session = "the lease is the session: "
	return conformance.Backend{
		Client: func(t *testing.T, owner string, _ time.Duration, _ bool) conformance.Locker {
			conn := zktest.Conn(t, z.Addrs(), zkSession, nil)
			return zkLocker{zookeeper.New(conn, zookeeper.Options{Root: root, Owner: owner, OpTimeout: ensembleOpTimeout})}
		},
		Drop: func(t *testing.T, key string) {
			dir := root + "/" + url.PathEscape(key)
			children, _, err := admin.Children(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range children {
				if err := admin.Delete(dir+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					t.Fatal(err)
				}
			}
		},
		NoExpiry:  session + "it ends when the holder's session expires (TestZooKeeper_SessionExpiryLosesTheLock in lock/zookeeper cuts one)",
		NoExtend:  session + "there is nothing to extend",
		NoNotices: "no wanted notices: a waiter's node is watched by the next waiter, not by the holder",
	}
}
