package lock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/zookeeper"
)

// requests counts the ZooKeeper requests Obtain reports making.
type requests struct {
	lock.NopObserver
	n atomic.Int64
}

func (r *requests) Obtained(_ string, reqs int, _ time.Duration, _ error) { r.n.Add(int64(reqs)) }

// benchZK is the standalone ZooKeeper (one JVM, -Xmx128m) that the
// zookeeper sub-benchmarks of one top-level benchmark share, connected with
// the service's session timeout; or why there is none.
type benchZK struct {
	c       *zk.Conn
	missing string
}

// benchZooKeeper starts it, unless ZooKeeper cannot run here: then the
// zookeeper sub-benchmarks skip, saying why, and the Redis ones still run.
func benchZooKeeper(b *testing.B) benchZK {
	b.Helper()
	if why := testenv.ZooKeeperMissing(); why != "" {
		return benchZK{missing: why}
	}
	z := testenv.StartZooKeeper(b)
	return benchZK{c: testenv.ZKConn(b, z.Addrs(), zkSession, nil)}
}

// conn returns the connection, or skips b.
func (z benchZK) conn(b *testing.B) *zk.Conn {
	b.Helper()
	if z.c == nil {
		b.Skip("zookeeper skipped: " + z.missing)
	}
	return z.c
}

// benchZKUncontended is BenchmarkUncontended on ZooKeeper: Obtain then
// Release of one key, one client; rt/acquire counts ZooKeeper requests
// (create, children, exists with a watch), rt/release is the delete.
func benchZKUncontended(b *testing.B, conn *zk.Conn) {
	obs := &requests{}
	c := zookeeper.New(conn, zookeeper.Options{Root: "/bench/" + testenv.Name("u"), Observer: obs})
	ctx := context.Background()
	for b.Loop() {
		l, err := c.Obtain(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(obs.n.Load())/float64(b.N), "rt/acquire")
	b.ReportMetric(1, "rt/release")
}

// benchZKContended is BenchmarkContended on ZooKeeper: the goroutines of one
// client take one key in turn, each with a node of its own in ZooKeeper's
// queue, woken by the watch on its predecessor (no polling, no herd).
func benchZKContended(b *testing.B, conn *zk.Conn, parallelism int, work func()) {
	obs := &requests{}
	c := zookeeper.New(conn, zookeeper.Options{Root: "/bench/" + testenv.Name("c"), Observer: obs})
	ctx := context.Background()
	b.SetParallelism(parallelism)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := c.Obtain(ctx, "k")
			if err != nil {
				b.Error(err)
				return
			}
			work()
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
	b.ReportMetric(float64(obs.n.Load()+int64(b.N))/float64(b.N), "rt/acq")
}

// zkSession is the session timeout of the benchmarks' clients: the
// service's default (zookeeper.session_timeout).
const zkSession = 6 * time.Second
