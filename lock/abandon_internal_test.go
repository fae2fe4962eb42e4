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

// lateReply is a backend whose obtain reaches Redis but whose reply is lost,
// as when an attempt times out after its SET landed.
type lateReply struct{ *single }

func (b lateReply) obtain(ctx context.Context, key, token string, ttl time.Duration, who *contender) (int64, int64, error) {
	if _, _, err := b.single.obtain(ctx, key, token, ttl, who); err != nil {
		return 0, noRank, err
	}
	return 0, noRank, fmt.Errorf("%w: obtain: reply lost: %w", ErrUnavailable, context.DeadlineExceeded)
}

func TestObtain_AbandonsLeaseWhoseReplyWasLost(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: locktest.RedisAddr()})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("shared Redis: %v", err)
	}
	prefix := fmt.Sprintf("locktest:abandon:%d:", time.Now().UnixNano())
	defer rdb.Del(context.Background(), prefix+"k", prefix+"k"+fenceSuffix)

	o := newOptions([]Option{WithPrefix(prefix), WithTTL(time.Minute)})
	c := newClient(lateReply{&single{rdb: rdb, fenceTTL: o.fenceTTL}}, o)
	_, err := c.Obtain(ctx, "k")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Obtain(replies lost) = %v; want ErrUnavailable", err)
	}
	// Both attempts' SETs landed; the failed Obtain must not leave the key
	// blocked for the minute-long TTL.
	if n := rdb.Exists(ctx, prefix+"k").Val(); n != 0 {
		t.Errorf("lease key still exists (TTL %v) after the failed Obtain; want released by token",
			rdb.PTTL(ctx, prefix+"k").Val())
	}
}
