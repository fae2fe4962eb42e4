package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
)

// startCluster starts n independent redis-servers (Redlock nodes).
func startCluster(t *testing.T, n int) []*redisServer {
	t.Helper()
	srvs := make([]*redisServer, n)
	for i := range srvs {
		srvs[i] = startRedis(t)
	}
	return srvs
}

// clientsOf returns a fresh go-redis client per node, as one process has.
func clientsOf(srvs []*redisServer) []redis.UniversalClient {
	rdbs := make([]redis.UniversalClient, len(srvs))
	for i, s := range srvs {
		rdbs[i] = s.client()
	}
	return rdbs
}

// holders returns, per node, the value stored at key ("" if none).
func holders(t *testing.T, rdbs []redis.UniversalClient, key string) []string {
	t.Helper()
	vals := make([]string, len(rdbs))
	for i, rdb := range rdbs {
		v, err := rdb.Get(context.Background(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			vals[i] = "<down>"
			continue
		}
		vals[i] = v
	}
	return vals
}

func count(vals []string, v string) int {
	n := 0
	for _, x := range vals {
		if x == v {
			n++
		}
	}
	return n
}

func TestRedlock_FiveNodes(t *testing.T) {
	srvs := startCluster(t, 5)
	rdbs := clientsOf(srvs)
	ctx := context.Background()
	c := lock.NewRedlock(rdbs, lock.WithTTL(2*time.Second), lock.WithWantedNotices(true))

	l, err := c.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("Obtain (5 up) = %v", err)
	}
	if l.Fence() != 0 {
		t.Errorf("Fence() in Redlock mode = %d; want 0", l.Fence())
	}
	if l.Wanting() != nil {
		t.Error("Wanting() in Redlock mode is a channel; want nil (redsync publishes nothing)")
	}
	if got := count(holders(t, rdbs, "lock:k"), l.Token()); got != 5 {
		t.Errorf("nodes holding the lease = %d; want 5", got)
	}

	other := lock.NewRedlock(clientsOf(srvs), lock.WithRetry(time.Millisecond, 2*time.Millisecond, 3))
	_, err = other.Obtain(ctx, "k")
	if !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Obtain (held by another) = %v; want ErrNotObtained, not ErrUnavailable", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if got := count(holders(t, rdbs, "lock:k"), ""); got != 5 {
		t.Errorf("nodes free after Release = %d; want 5", got)
	}

	// Redlock cannot tell whether the key is wanted: Keep lets it go.
	l, err = c.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if kept, err := l.Keep(ctx); kept || err != nil {
		t.Errorf("Keep in Redlock mode = %v, %v; want false, nil (released)", kept, err)
	}
	if got := count(holders(t, rdbs, "lock:k"), ""); got != 5 {
		t.Errorf("nodes free after Keep = %d; want 5", got)
	}

	srvs[3].stop()
	srvs[4].stop()
	l, err = c.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("Obtain (2 of 5 down) = %v; want a quorum of 3", err)
	}
	if err := l.Refresh(ctx, 2*time.Second); err != nil {
		t.Errorf("Refresh (2 of 5 down) = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release (2 of 5 down) = %v", err)
	}

	srvs[2].stop()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Obtain(dctx, "k")
	elapsed := time.Since(start)
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Obtain (3 of 5 down) = %v; want ErrUnavailable", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("Obtain (3 of 5 down) took %v; want fail fast, far inside the 10s deadline", elapsed)
	}
	t.Logf("3 of 5 down: %v after %v", err, elapsed)
}

// TestRedlock_LostAfterRestartWithoutPersistence shows Redlock's known
// weakness: a node that restarts without persistence forgets the lease, and
// a second client can assemble a majority while the first still holds it.
func TestRedlock_LostAfterRestartWithoutPersistence(t *testing.T) {
	srvs := startCluster(t, 5)
	ctx := context.Background()
	a := lock.NewRedlock(clientsOf(srvs), lock.WithTTL(10*time.Second))
	b := lock.NewRedlock(clientsOf(srvs), lock.WithTTL(10*time.Second),
		lock.WithRetry(time.Millisecond, 2*time.Millisecond, 5))
	inspect := clientsOf(srvs)

	// A obtains with nodes 3 and 4 unreachable: it holds 0, 1, 2.
	srvs[3].stop()
	srvs[4].stop()
	la, err := a.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("A: Obtain = %v", err)
	}
	srvs[3].start()
	srvs[4].start()
	if got := holders(t, inspect, "lock:k"); count(got, la.Token()) != 3 {
		t.Fatalf("A holds %v; want 3 of 5", got)
	}

	// Node 0 crashes and comes back empty; A's lease is valid for ~10s more.
	srvs[0].restart()

	lb, err := b.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("B: Obtain = %v; the weakness did not show", err)
	}
	select {
	case <-la.Lost():
		t.Fatal("A was told about the loss; Redlock cannot know")
	default:
	}
	got := holders(t, inspect, "lock:k")
	t.Logf("nodes: %q; A token %s, B token %s: both believe they hold the lock", got, la.Token(), lb.Token())
	if count(got, la.Token()) != 2 || count(got, lb.Token()) != 3 {
		t.Errorf("holders = %v; want A on 2 nodes and B on 3", got)
	}

	if err := lb.Release(ctx); err != nil {
		t.Errorf("B: Release = %v", err)
	}
	if err := la.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("A: Release = %v; want ErrNotHeld (only 2 of 5 nodes)", err)
	}
}
