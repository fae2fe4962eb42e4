package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
)

// waitContenders waits, bounded, until n ranked contenders of key count.
func waitContenders(t *testing.T, rdb *redis.Client, rkey string, n int64) {
	t.Helper()
	for range 500 {
		if rdb.ZCard(context.Background(), rkey+":ranks").Val() == n {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling Redis, bounded: 5s
	}
	t.Fatalf("%s: %d ranked contenders; want %d", rkey, rdb.ZCard(context.Background(), rkey+":ranks").Val(), n)
}

// A released key goes to the lowest rank waiting, whichever contender
// started waiting first, and the holder hears that rank.
func TestObtainRanked_LowestRankGoesFirst(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newClient := func() *lock.Client {
		c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithWantedNotices(true), lock.WithRetry(time.Millisecond, 32*time.Millisecond, 0))
		t.Cleanup(func() { c.Close() })
		return c
	}
	holder, young, old := newClient(), newClient(), newClient()
	held, err := holder.ObtainRanked(ctx, "k", 5)
	if err != nil {
		t.Fatalf("ObtainRanked(free key) = %v", err)
	}
	if r, ok := held.Contender(); ok {
		t.Errorf("Contender() = %d, true with nobody waiting; want false", r)
	}
	var (
		mu  sync.Mutex
		got []string // in the order they obtained
		wg  sync.WaitGroup
	)
	wait := func(c *lock.Client, name string, rank int64) {
		defer wg.Done()
		l, err := c.ObtainRanked(ctx, "k", rank)
		mu.Lock()
		got = append(got, name)
		mu.Unlock()
		if err != nil {
			t.Errorf("%s: ObtainRanked = %v", name, err)
			return
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("%s: Release = %v", name, err)
		}
	}
	wg.Add(2)
	go wait(young, "young", 30)
	waitContenders(t, rdb, prefix+"k", 1)
	go wait(old, "old", 20)
	waitContenders(t, rdb, prefix+"k", 2)
	for range 500 { // the notices reach the holder; bounded: 5s
		if r, _ := held.Contender(); r == 20 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r, ok := held.Contender(); r != 20 || !ok {
		t.Errorf("holder's Contender() = %d, %v; want 20, true (the lower of 30 and 20)", r, ok)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	wg.Wait()
	if len(got) != 2 || got[0] != "old" || got[1] != "young" {
		t.Errorf("obtained in the order %v; want old (rank 20), then young (rank 30)", got)
	}
	if n := rdb.Exists(ctx, prefix+"k:ranks", prefix+"k:ranks-exp").Val(); n != 0 {
		t.Errorf("%d rank keys left after every contender obtained; want none", n)
	}
}

// A contender that gives up takes its rank back at once, and one that
// dies holds the others up for its rank's lifetime only.
func TestObtainRanked_GivingUpOrDyingFreesTheTurn(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := []lock.Option{lock.WithPrefix(prefix), lock.WithWantedNotices(true), lock.WithRetry(time.Millisecond, 8*time.Millisecond, 0)}
	holder, quitter, next := lock.New(rdb, opts...), lock.New(rdb, opts...), lock.New(rdb, opts...)
	defer holder.Close()
	defer quitter.Close()
	defer next.Close()
	held, err := holder.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("Obtain = %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = quitter.ObtainRanked(short, "k", 1)
	cancelShort()
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("ObtainRanked(held key, short ctx) = %v; want ErrNotObtained", err)
	}
	if n := rdb.ZCard(ctx, prefix+"k:ranks").Val(); n != 0 {
		t.Errorf("%d ranked contenders after the only one gave up; want 0", n)
	}
	// A dead contender: rank 1 announced, never renewed.
	rdb.ZAdd(ctx, prefix+"k:ranks", redis.Z{Score: 1, Member: "dead"})
	rdb.ZAdd(ctx, prefix+"k:ranks-exp", redis.Z{Score: float64(time.Now().Add(300 * time.Millisecond).UnixMilli()), Member: "dead"})
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	l, err := next.ObtainRanked(ctx, "k", 2)
	if err != nil {
		t.Fatalf("ObtainRanked behind a dead contender of rank 1 = %v; want obtained once its rank lapsed", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release = %v", err)
	}
}

// A contender refused a free key because a lower rank waits marks the key
// wanted all the same, so the release of the lower rank's turn is heard
// (Wanted, and the freed notice that wakes a waiter at once) instead of
// the waiter sleeping out its back-off while the key stands free.
func TestObtainRanked_RefusedForALowerRankMarksTheKeyWanted(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// One attempt each; the mark lasts two back-off caps (2s here).
	opts := []lock.Option{lock.WithPrefix(prefix), lock.WithWantedNotices(true), lock.WithRetry(time.Millisecond, time.Second, 1)}
	low, high := lock.New(rdb, opts...), lock.New(rdb, opts...)
	defer low.Close()
	defer high.Close()
	// A contender of rank 1 waits (announced as low's would be), the key free.
	rdb.ZAdd(ctx, prefix+"k:ranks", redis.Z{Score: 1, Member: "waiting"})
	rdb.ZAdd(ctx, prefix+"k:ranks-exp", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "waiting"})
	if _, err := high.ObtainRanked(ctx, "k", 2); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("ObtainRanked(free key, rank 2, rank 1 waiting) = %v; want ErrNotObtained", err)
	}
	if n := rdb.Exists(ctx, prefix+"k:wanted").Val(); n != 1 {
		t.Errorf("wanted mark after a refusal for a lower rank: %d keys; want 1", n)
	}
	rdb.ZRem(ctx, prefix+"k:ranks", "waiting")
	rdb.ZRem(ctx, prefix+"k:ranks-exp", "waiting")
	l, err := low.ObtainRanked(ctx, "k", 1)
	if err != nil {
		t.Fatalf("ObtainRanked(free key, rank 1) = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if !l.Wanted() {
		t.Error("Wanted() = false after a higher rank was refused during the turn; want true (its release wakes that contender)")
	}
}
