package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/lock"
)

// BenchmarkObtainRanked_Handoff passes one key back and forth between two
// Clients, each waiting ranked while the other holds it, with wanted
// notices as the order path uses them: one op is one handoff, from the
// holder's Release to the waiter's ObtainRanked returning (the waiter's
// first, refused attempt is not timed). It is the lock's part of what
// the order path pays per turn (docs/design.md, invariant 19).
func BenchmarkObtainRanked_Handoff(b *testing.B) {
	rdb, prefix := sharedRedis(b)
	opts := []lock.Option{lock.WithPrefix(prefix), lock.WithWantedNotices(true), lock.WithRetry(time.Millisecond, 32*time.Millisecond, 0)}
	c := [2]*lock.Client{lock.New(rdb, opts...), lock.New(newShared(b), opts...)}
	defer c[0].Close()
	defer c[1].Close()
	ctx := context.Background()
	held, err := c[0].ObtainRanked(ctx, "k", 1)
	if err != nil {
		b.Fatal(err)
	}
	type result struct {
		l   *lock.Lock
		err error
	}
	got := make(chan result)
	rank := int64(2)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		next := c[(i+1)%2]
		go func(r int64) {
			l, err := next.ObtainRanked(ctx, "k", r)
			got <- result{l, err}
		}(rank)
		rank++
		// Let the waiter be refused once, as a contender that waits for a
		// holder is: the release then wakes it.
		for !waiting(held) {
			time.Sleep(50 * time.Microsecond)
		}
		b.StartTimer()
		if err := held.Release(ctx); err != nil {
			b.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			b.Fatal(r.err)
		}
		held = r.l
	}
	b.StopTimer()
	_ = held.Release(ctx)
}

// waiting reports whether someone else was heard waiting for l's key.
func waiting(l *lock.Lock) bool {
	select {
	case <-l.Wanting():
		return true
	default:
		return false
	}
}
