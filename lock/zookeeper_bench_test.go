package lock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
)

// requests counts the ZooKeeper requests Obtain reports making.
type requests struct {
	lock.NopObserver
	n atomic.Int64
}

func (r *requests) Obtained(_ string, reqs int, _ time.Duration, _ error) { r.n.Add(int64(reqs)) }

// BenchmarkZooKeeper is BenchmarkUncontended and BenchmarkContended on a
// standalone ZooKeeper (one JVM, -Xmx128m, started once for both), so that
// benchstat puts the two backends side by side in one run:
//   - uncontended: Obtain then Release of one key, one client; rt/acquire
//     counts ZooKeeper requests (create, children, exists with a watch);
//   - contended: 16 goroutines (parallelism 8) of one client take one key
//     in turn, each with a node of its own in ZooKeeper's queue.
func BenchmarkZooKeeper(b *testing.B) {
	z := testenv.StartZooKeeper(b)
	conn := testenv.ZKConn(b, z.Addrs(), zkSession, nil)
	ctx := context.Background()
	b.Run("uncontended", func(b *testing.B) {
		obs := &requests{}
		c := lock.NewZooKeeper(conn, lock.ZooKeeperOptions{Root: "/bench/u", Observer: obs})
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
	})
	for _, hold := range []time.Duration{0, 500 * time.Microsecond} {
		b.Run("contended/hold="+hold.String(), func(b *testing.B) {
			obs := &requests{}
			c := lock.NewZooKeeper(conn, lock.ZooKeeperOptions{Root: "/bench/c", Observer: obs})
			b.SetParallelism(8)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := c.Obtain(ctx, "k")
					if err != nil {
						b.Error(err)
						return
					}
					if hold > 0 {
						time.Sleep(hold) // the critical section
					}
					if err := l.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
			b.ReportMetric(float64(obs.n.Load()+int64(b.N))/float64(b.N), "rt/acq")
		})
	}
}
