package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
)

// TestInspect_OneRoundTripNoExtension: once Redis has the script, reading
// a held lock costs one round trip, and the lease's PTTL read before and
// after it did not grow; obtaining with an owner still costs one.
func TestInspect_OneRoundTripNoExtension(t *testing.T) {
	_, prefix := sharedRedis(t)
	rdb := newShared(t)
	cnt := countCommands(rdb)
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithOwner("inst-1"))
	ctx := context.Background()
	warm, err := c.Obtain(ctx, "k") // load the scripts
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Inspect(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}

	n0 := cnt.n.Load()
	l, err := c.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if got := cnt.n.Load() - n0; got != 1 {
		t.Errorf("Obtain with an owner: %d round trips; want 1", got)
	}
	admin := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer admin.Close()
	before := admin.PTTL(ctx, prefix+"k").Val()
	n1 := cnt.n.Load()
	st, err := c.Inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := cnt.n.Load() - n1; got != 1 {
		t.Errorf("Inspect: %d round trips; want 1", got)
	}
	after := admin.PTTL(ctx, prefix+"k").Val()
	if after > before || before <= 0 {
		t.Errorf("PTTL %v before Inspect, %v after; want positive and not extended", before, after)
	}
	if !st.Held || st.Owner != "inst-1" || st.Fence != l.Fence() || st.LeaseLeft > before+time.Millisecond {
		t.Errorf("Inspect = %+v; want held by inst-1, fence %d, lease left at most %v", st, l.Fence(), before)
	}
}
