package zookeeper_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/locktest"
	"github.com/seckill/seckill/lock/zookeeper"
	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

// requests counts the ZooKeeper requests Obtain reports making.
type requests struct {
	lock.NopObserver
	n atomic.Int64
}

func (r *requests) Obtained(_ string, reqs int, _ time.Duration, _ error) { r.n.Add(int64(reqs)) }

// The lock module's benchmarks of the same names measure the Redis lock
// and redsync; these are their zookeeper sub-benchmarks, so that benchstat
// puts the three side by side. Each top-level benchmark starts a private
// standalone ZooKeeper (one JVM, -Xmx128m), connected with the service's
// session timeout, and skips, saying why, where ZooKeeper cannot run.

func BenchmarkUncontended(b *testing.B) {
	conn := benchConn(b)
	b.Run("zookeeper", func(b *testing.B) { benchZKUncontended(b, conn) })
}

// BenchmarkContended has 8×GOMAXPROCS goroutines of one client take one key in turn,
// with an empty critical section (hold=0) or one that sleeps 500µs.
func BenchmarkContended(b *testing.B) {
	conn := benchConn(b)
	for _, hold := range []time.Duration{0, 500 * time.Microsecond} {
		work := func() {
			if hold > 0 {
				time.Sleep(hold) // the critical section
			}
		}
		b.Run("hold="+hold.String(), func(b *testing.B) {
			b.Run("zookeeper", func(b *testing.B) { benchZKContended(b, conn, 8, work) })
		})
	}
}

func benchConn(b *testing.B) *zk.Conn {
	b.Helper()
	if why := zktest.Missing(); why != "" {
		b.Skip(why)
	}
	z := zktest.Start(b)
	return zktest.Conn(b, z.Addrs(), zkSession, nil)
}

// benchZKUncontended is BenchmarkUncontended on ZooKeeper: Obtain then
// Release of one key, one client; rt/acquire counts ZooKeeper requests
// (create, children, exists with a watch), rt/release is the delete.
func benchZKUncontended(b *testing.B, conn *zk.Conn) {
	obs := &requests{}
	c := zookeeper.New(conn, zookeeper.Options{Root: "/bench/" + locktest.Name("u"), Observer: obs})
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
	c := zookeeper.New(conn, zookeeper.Options{Root: "/bench/" + locktest.Name("c"), Observer: obs})
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
