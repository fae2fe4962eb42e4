package lock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock/locktest"
)

type attemptsSeen struct {
	NopObserver
	last atomic.Int64
}

func (a *attemptsSeen) Obtained(_ string, attempts int, _ time.Duration, _ error) {
	a.last.Store(int64(attempts))
}

func TestRelease_OfAWantedKeyYieldsTheNextObtainToTheWaiter(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: locktest.RedisAddr()})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("shared Redis: %v", err)
	}
	for _, waiter := range []bool{false, true} {
		t.Run(fmt.Sprintf("waiter=%v", waiter), func(t *testing.T) {
			prefix := fmt.Sprintf("locktest:yield:%d:", time.Now().UnixNano())
			defer rdb.Del(context.Background(), prefix+"k", prefix+"k"+fenceSuffix, prefix+"k"+wantedSuffix)
			seen := &attemptsSeen{}
			// A back-off cap of a minute: a yield (1.25 times it) outlasts
			// every deadline below, so nothing here depends on timing.
			// B makes one attempt (it never backs off); its cap of a minute
			// keeps its refused attempt's mark (twice the cap, at most a
			// lease) until A's release reads it, however slow the box. A
			// cap of 1 ms left a mark of 2 ms, which a busy box outran.
			a := New(rdb, WithPrefix(prefix), WithRetry(time.Millisecond, time.Minute, 0), WithObserver(seen))
			b := New(rdb, WithPrefix(prefix), WithRetry(time.Millisecond, time.Minute, 1))
			held, err := a.Obtain(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if waiter {
				if _, err := b.Obtain(ctx, "k"); !errors.Is(err, ErrNotObtained) {
					t.Fatalf("B: Obtain(held by A) = %v; want ErrNotObtained", err)
				}
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if held.Wanted() != waiter {
				t.Errorf("Wanted() after release = %v; want %v", held.Wanted(), waiter)
			}

			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			again, err := a.Obtain(short, "k")
			cancel()
			if !waiter {
				if err != nil {
					t.Fatalf("A: Obtain(free, nobody waiting) = %v; want the lock at once", err)
				}
				again.Release(ctx)
				return
			}
			if !errors.Is(err, ErrNotObtained) || seen.last.Load() != 0 {
				t.Fatalf("A: Obtain(free, B waiting) = %v after %d attempts; want ErrNotObtained without an attempt (yielding)", err, seen.last.Load())
			}
			// The yield is spent on that call; B's turn was never taken.
			lb, err := b.Obtain(ctx, "k")
			if err != nil {
				t.Fatalf("B: Obtain(released to it) = %v; want the lock", err)
			}
			lb.Release(ctx)
		})
	}
}
