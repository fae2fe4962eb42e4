package lock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock/locktest"
)

// betweenAttempts is a backend that runs hook after each obtain attempt,
// so a test can act on the key between two attempts of one Obtain.
type betweenAttempts struct {
	*single
	hook func()
}

func (b betweenAttempts) obtain(ctx context.Context, key, token string, ttl time.Duration, who *contender) (int64, int64, error) {
	f, others, err := b.single.obtain(ctx, key, token, ttl, who)
	b.hook()
	return f, others, err
}

func TestObtain_TellsALiveHolderFromOneThatMayBeDead(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: locktest.RedisAddr()})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("shared Redis: %v", err)
	}
	tests := []struct {
		name      string
		meanwhile func(t *testing.T, holder *Lock, holders *Client) // between the second attempt and the third
		contended bool
	}{
		{"holder silent", func(*testing.T, *Lock, *Client) {}, false},
		{"lease renewed", func(t *testing.T, holder *Lock, _ *Client) {
			if err := holder.Refresh(ctx, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"lease passed to a new holder", func(t *testing.T, holder *Lock, _ *Client) {
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// A longer lease than the first's, so its TTL is higher
			// however fast this runs.
			next, err := New(rdb, WithPrefix(holder.c.opts.prefix), WithTTL(2*time.Minute)).Obtain(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { next.Release(context.Background()) })
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := fmt.Sprintf("locktest:contended:%d:", time.Now().UnixNano())
			defer rdb.Del(context.Background(), prefix+"k", prefix+"k"+fenceSuffix)
			holders := New(rdb, WithPrefix(prefix), WithTTL(time.Minute))
			holder, err := holders.Obtain(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { holder.Release(context.Background()) })

			attempts := 0
			o := newOptions([]Option{WithPrefix(prefix), WithTTL(time.Minute), WithRetry(time.Millisecond, time.Millisecond, 3)})
			c := newClient(betweenAttempts{&single{rdb: rdb, fenceTTL: o.fenceTTL}, func() {
				attempts++
				if attempts == 2 {
					tc.meanwhile(t, holder, holders)
				}
			}}, o)
			_, err = c.Obtain(ctx, "k")
			if !errors.Is(err, ErrNotObtained) {
				t.Fatalf("Obtain(held) = %v; want ErrNotObtained", err)
			}
			if got := errors.Is(err, ErrContended); got != tc.contended {
				t.Errorf("Obtain(held, %s) = %v: ErrContended %v; want %v", tc.name, err, got, tc.contended)
			}
		})
	}
}
