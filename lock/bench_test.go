package lock_test

import (
	"context"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/seckill/seckill/lock"
)

// Benchmarks run against the shared Redis; lock/zookeeper has the
// zookeeper sub-benchmarks of the same names, so that benchstat puts the
// three side by side. Round trips are counted with a go-redis hook (a
// pipeline counts as one).

func BenchmarkUncontended(b *testing.B) {
	b.Run("lock", func(b *testing.B) {
		_, prefix := sharedRedis(b)
		rdb := newShared(b)
		cnt := countCommands(rdb)
		c := lock.New(rdb, lock.WithPrefix(prefix))
		ctx := context.Background()
		warm, err := c.Obtain(ctx, "k") // load the scripts
		if err != nil {
			b.Fatal(err)
		}
		if err := warm.Release(ctx); err != nil {
			b.Fatal(err)
		}
		var acquireRT, releaseRT int64
		b.ResetTimer()
		for b.Loop() {
			n0 := cnt.n.Load()
			l, err := c.Obtain(ctx, "k")
			if err != nil {
				b.Fatal(err)
			}
			n1 := cnt.n.Load()
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
			acquireRT += n1 - n0
			releaseRT += cnt.n.Load() - n1
		}
		b.ReportMetric(float64(acquireRT)/float64(b.N), "rt/acquire")
		b.ReportMetric(float64(releaseRT)/float64(b.N), "rt/release")
	})
	b.Run("redsync", func(b *testing.B) {
		_, prefix := sharedRedis(b)
		rdb := newShared(b)
		cnt := countCommands(rdb)
		rs := redsync.New(goredis.NewPool(rdb))
		ctx := context.Background()
		var acquireRT, releaseRT int64
		for b.Loop() {
			m := rs.NewMutex(prefix+"k", redsync.WithExpiry(10*time.Second))
			n0 := cnt.n.Load()
			if err := m.LockContext(ctx); err != nil {
				b.Fatal(err)
			}
			n1 := cnt.n.Load()
			if ok, err := m.UnlockContext(ctx); !ok || err != nil {
				b.Fatal(ok, err)
			}
			acquireRT += n1 - n0
			releaseRT += cnt.n.Load() - n1
		}
		b.ReportMetric(float64(acquireRT)/float64(b.N), "rt/acquire")
		b.ReportMetric(float64(releaseRT)/float64(b.N), "rt/release")
	})
}

// BenchmarkContended has 16 goroutines take one
// key in turn, with an empty critical section (hold=0) or one that sleeps
// 500µs, standing in for a short database transaction:
//   - queue:   one Client, so one goroutine competes in Redis, the rest wait
//     locally and are handed the key on release;
//   - poll:    a Client per goroutine, so every goroutine polls Redis with
//     this package's back-off (1ms..64ms, full jitter);
//   - redsync: a redsync Mutex per goroutine with the same back-off.
//
// lock/zookeeper's BenchmarkContended adds zookeeper: one ZooKeeper client,
// every goroutine with a node of its own in ZooKeeper's queue, woken by a
// watch on its predecessor.
func BenchmarkContended(b *testing.B) {
	for _, hold := range []time.Duration{0, 500 * time.Microsecond} {
		b.Run("hold="+hold.String(), func(b *testing.B) { benchContended(b, hold) })
	}
}

func benchContended(b *testing.B, hold time.Duration) {
	const parallelism = 8
	work := func() {
		if hold > 0 {
			time.Sleep(hold) // the critical section
		}
	}
	report := func(b *testing.B, start time.Time, cnt *cmdCounter) {
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
		b.ReportMetric(float64(cnt.n.Load())/float64(b.N), "rt/acq")
	}
	b.Run("queue", func(b *testing.B) {
		_, prefix := sharedRedis(b)
		rdb := newShared(b)
		c := lock.New(rdb, lock.WithPrefix(prefix))
		cnt := countCommands(rdb)
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
		report(b, start, cnt)
	})
	b.Run("poll", func(b *testing.B) {
		_, prefix := sharedRedis(b)
		rdb := newShared(b)
		cnt := countCommands(rdb)
		ctx := context.Background()
		b.SetParallelism(parallelism)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			c := lock.New(rdb, lock.WithPrefix(prefix))
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
		report(b, start, cnt)
	})
	b.Run("redsync", func(b *testing.B) {
		_, prefix := sharedRedis(b)
		rdb := newShared(b)
		cnt := countCommands(rdb)
		rs := redsync.New(goredis.NewPool(rdb))
		ctx := context.Background()
		backoff := func(tries int) time.Duration {
			ceiling := 64 * time.Millisecond
			if tries < 7 {
				ceiling = min(ceiling, time.Millisecond<<(tries-1))
			}
			return mrand.N(ceiling + 1)
		}
		b.SetParallelism(parallelism)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m := rs.NewMutex(prefix+"k", redsync.WithExpiry(10*time.Second),
					redsync.WithTries(1<<30), redsync.WithRetryDelayFunc(backoff))
				if err := m.LockContext(ctx); err != nil {
					b.Error(err)
					return
				}
				work()
				if ok, err := m.UnlockContext(ctx); !ok || err != nil {
					b.Error(ok, err)
					return
				}
			}
		})
		report(b, start, cnt)
	})
}
