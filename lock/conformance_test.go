package lock_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/zookeeper"
)

// The lock contract, written once and run against every backend on real
// servers (TestConformance). A backend that cannot meet a clause skips it,
// saying why; docs/locking.md lists the same.

// locker is what the suite asks of a backend's client.
type locker interface {
	Obtain(ctx context.Context, key string) (held, error)
	Inspect(ctx context.Context, key string) (lock.State, error)
	// List returns the keys the store may hold a lease for.
	List(ctx context.Context) ([]string, error)
}

// held is what the suite asks of a held lock.
type held interface {
	Fence() int64
	Lost() <-chan struct{}
	Release(ctx context.Context) error
	Token() string
}

// backend builds clients of one lock store.
type backend struct {
	// client returns a new client, as another process would have (its own
	// connections or session), naming its leases owner. Redis leases last
	// ttl, renewed by a watchdog when watchdog; ZooKeeper's last the session.
	client func(t *testing.T, owner string, ttl time.Duration, watchdog bool) locker
	// drop deletes key's lease behind its holder's back.
	drop func(t *testing.T, key string)
	// The clauses the backend cannot meet, with the reason ("" meets it).
	noFence, noExpiry, noExtend, noNotices string
}

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(t *testing.T) backend
	}{
		{"standalone", standaloneBackend},
		{"sentinel", sentinelBackend},
		{"cluster", clusterBackend},
		{"redlock", redlockBackend},
		{"zookeeper", zooKeeperBackend},
	} {
		t.Run(c.name, func(t *testing.T) { runContract(t, c.start(t)) })
	}
}

func runContract(t *testing.T, b backend) {
	t.Run("MutualExclusion", func(t *testing.T) { contractMutualExclusion(t, b) })
	t.Run("TokenCheckedReleaseAndExtend", func(t *testing.T) { contractTokenChecked(t, b) })
	t.Run("LeaseExpiry", func(t *testing.T) { contractLeaseExpiry(t, b) })
	t.Run("FenceMonotonic", func(t *testing.T) { contractFenceMonotonic(t, b) })
	t.Run("LossSignalled", func(t *testing.T) { contractLossSignalled(t, b) })
	t.Run("ContextCancellation", func(t *testing.T) { contractContextCancellation(t, b) })
	t.Run("WantedNotices", func(t *testing.T) { contractWantedNotices(t, b) })
	t.Run("Inspection", func(t *testing.T) { contractInspection(t, b) })
}

const contractTTL = 10 * time.Second

func contractCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// key returns a key of the clause's own, hash-tagged for Cluster.
func contractKey(t *testing.T) string { return "{" + testenv.Name("k") + "}" }

// contractMutualExclusion: goroutines of three clients released at once
// never hold the key together, every Obtain succeeds, and fences strictly
// increase in the order of holding.
func contractMutualExclusion(t *testing.T, b backend) {
	const clients, goroutines, each = 3, 4, 5
	ctx, key := contractCtx(t), contractKey(t)
	var (
		inside, maxInside, obtained atomic.Int64
		mu                          sync.Mutex
		fences                      []int64
		wg                          sync.WaitGroup
		start                       = make(chan struct{})
	)
	for i := range clients {
		c := b.client(t, "c"+string(rune('0'+i)), contractTTL, false)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range each {
					l, err := c.Obtain(ctx, key)
					if err != nil {
						t.Error(err)
						return
					}
					n := inside.Add(1)
					for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
					}
					obtained.Add(1)
					mu.Lock()
					fences = append(fences, l.Fence())
					mu.Unlock()
					inside.Add(-1)
					if err := l.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if got, want := obtained.Load(), int64(clients*goroutines*each); got != want {
		t.Errorf("obtained %d times; want %d", got, want)
	}
	if got := maxInside.Load(); got != 1 {
		t.Errorf("at most %d holders at once; want 1", got)
	}
	if b.noFence != "" {
		return
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fence #%d = %d after %d; want strictly increasing in the order of holding", i, fences[i], fences[i-1])
		}
	}
}

// contractTokenChecked: a holder whose lease was taken from it cannot
// release or extend the next holder's.
func contractTokenChecked(t *testing.T, b backend) {
	ctx, key := contractCtx(t), contractKey(t)
	a, c := b.client(t, "a", contractTTL, false), b.client(t, "b", contractTTL, false)
	la, err := a.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	b.drop(t, key)
	lb, err := c.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release(ctx)
	if err := la.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release by the lease's former holder = %v; want ErrNotHeld", err)
	}
	if r, ok := la.(interface {
		Refresh(context.Context, time.Duration) error
	}); ok && b.noExtend == "" {
		if err := r.Refresh(ctx, contractTTL); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Refresh by the lease's former holder = %v; want ErrNotHeld", err)
		}
	}
	st, err := c.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || st.Owner != "b" {
		t.Errorf("after the former holder's release and extend: %+v; want held by b", st)
	}
	if b.noExtend != "" {
		t.Skip("extend: " + b.noExtend)
	}
}

// contractLeaseExpiry: a lease its holder neither releases nor renews
// ends after its TTL, and another client obtains the key.
func contractLeaseExpiry(t *testing.T, b backend) {
	if b.noExpiry != "" {
		t.Skip(b.noExpiry)
	}
	ctx, key := contractCtx(t), contractKey(t)
	gone := b.client(t, "gone", 300*time.Millisecond, false)
	lg, err := gone.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	next := b.client(t, "next", contractTTL, false)
	ln, err := next.Obtain(ctx, key) // waits out the 300ms lease, bounded by ctx
	if err != nil {
		t.Fatalf("Obtain after the holder's lease ran out = %v", err)
	}
	defer ln.Release(ctx)
	if err := lg.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release of the expired lease = %v; want ErrNotHeld", err)
	}
}

// contractFenceMonotonic: holders of two clients taking the key in turn
// get strictly increasing fences, and inspection shows the holder's.
func contractFenceMonotonic(t *testing.T, b backend) {
	if b.noFence != "" {
		t.Skip(b.noFence)
	}
	ctx, key := contractCtx(t), contractKey(t)
	cs := []locker{b.client(t, "a", contractTTL, false), b.client(t, "b", contractTTL, false)}
	var last int64
	for i := range 6 {
		c := cs[i%2]
		l, err := c.Obtain(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Errorf("holder #%d: fence %d after %d; want greater", i, l.Fence(), last)
		}
		last = l.Fence()
		st, err := c.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Fence != l.Fence() {
			t.Errorf("holder #%d: Inspect fence %d; want the holder's %d", i, st.Fence, l.Fence())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// contractLossSignalled: a lease deleted behind its holder's back closes
// the holder's Lost.
func contractLossSignalled(t *testing.T, b backend) {
	ctx, key := contractCtx(t), contractKey(t)
	c := b.client(t, "a", time.Second, true)
	l, err := c.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	b.drop(t, key)
	select {
	case <-l.Lost():
	case <-ctx.Done():
		t.Fatal("Lost not closed within a minute of the lease's deletion")
	}
}

// contractContextCancellation: an Obtain of a held key returns
// ErrNotObtained joined with the context's error, and leaves the holder's
// lease as it was.
func contractContextCancellation(t *testing.T, b backend) {
	ctx, key := contractCtx(t), contractKey(t)
	a, c := b.client(t, "a", contractTTL, false), b.client(t, "b", contractTTL, false)
	la, err := a.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(ctx)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if lb, err := c.Obtain(short, key); !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		if lb != nil {
			lb.Release(ctx)
		}
		t.Fatalf("Obtain of a held key until the deadline = %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	st, err := a.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || st.Owner != "a" {
		t.Errorf("after the refused Obtain: %+v; want still held by a", st)
	}
}

// contractWantedNotices: a holder hears that another client was refused
// its key.
func contractWantedNotices(t *testing.T, b backend) {
	if b.noNotices != "" {
		t.Skip(b.noNotices)
	}
	ctx, key := contractCtx(t), contractKey(t)
	a, c := b.client(t, "a", contractTTL, false), b.client(t, "b", contractTTL, false)
	la, err := a.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(ctx)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if lb, err := c.Obtain(short, key); err == nil {
		lb.Release(ctx)
		t.Fatal("Obtain of a held key succeeded")
	}
	select {
	case <-la.(*lock.Lock).Wanting():
	case <-ctx.Done():
		t.Fatal("Wanting not closed within a minute of a refused Obtain")
	}
}

// contractInspection: inspection tells free from held, names the holder
// (owner, token prefix, fence), counts this client's waiters, never
// extends the lease, and follows the key from holder to holder.
func contractInspection(t *testing.T, b backend) {
	ctx, key := contractCtx(t), contractKey(t)
	a := b.client(t, "a", contractTTL, false)
	if st, err := a.Inspect(ctx, key); err != nil || st.Held {
		t.Fatalf("Inspect(a key never taken) = %+v, %v; want free", st, err)
	}
	la, err := a.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_, token := lock.SplitToken(la.Token())
	if !first.Held || first.Owner != "a" || first.Token != token || !first.Renewed {
		t.Errorf("Inspect(held) = %+v; want held by a, token %q, renewed", first, token)
	}
	if len(first.Token) >= len(strings.TrimPrefix(la.Token(), "a:")) {
		t.Errorf("Inspect shows token %q: the whole token", first.Token)
	}
	if keys, err := a.List(ctx); err != nil || !slices.Contains(keys, key) {
		t.Errorf("List() = %v, %v; want it to include the held %s", keys, err, key)
	}
	if b.noFence == "" && first.Fence != la.Fence() {
		t.Errorf("Inspect fence %d; want the holder's %d", first.Fence, la.Fence())
	}
	if d := time.Since(first.Since); b.noFence == "" && (d < -time.Minute || d > time.Minute) {
		t.Errorf("Inspect: held since %v; want about now (same machine's clock)", first.Since)
	}
	if b.noExpiry == "" {
		second, err := a.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if first.LeaseLeft <= 0 || second.LeaseLeft > first.LeaseLeft {
			t.Errorf("lease left %v, then %v; want positive and not extended by inspection", first.LeaseLeft, second.LeaseLeft)
		}
	}

	// A second goroutine of the same client waits for the key.
	next := make(chan held, 1)
	go func() {
		l, err := a.Obtain(ctx, key)
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	for {
		st, err := a.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Inspect: %+v; want 1 waiter", st)
		}
		time.Sleep(5 * time.Millisecond) // polling for the waiter, bounded by ctx
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ln := <-next
	if ln == nil {
		t.FailNow()
	}
	st, err := a.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, tok := lock.SplitToken(ln.Token()); !st.Held || st.Token != tok || st.Waiters != 0 {
		t.Errorf("Inspect(next holder) = %+v; want held with token %q, no waiter", st, tok)
	}
	if b.noFence == "" && st.Fence <= la.Fence() {
		t.Errorf("next holder's fence %d; want above the first's %d", st.Fence, la.Fence())
	}
	if err := ln.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Inspect(ctx, key); err != nil || st.Held {
		t.Errorf("Inspect(released) = %+v, %v; want free", st, err)
	}
}

// redisLocker adapts a *lock.Client to the suite.
type redisLocker struct{ *lock.Client }

func (c redisLocker) Obtain(ctx context.Context, key string) (held, error) {
	l, err := c.Client.Obtain(ctx, key)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (c redisLocker) List(ctx context.Context) ([]string, error) { return c.HeldKeys(ctx, "*", 1000) }

// redisBackend is a backend of one Redis (standalone, Sentinel or
// Cluster), each client made by newRDB.
func redisBackend(t *testing.T, prefix string, newRDB func() redis.UniversalClient) backend {
	admin := newRDB()
	t.Cleanup(func() { admin.Close() })
	return backend{
		client: func(t *testing.T, owner string, ttl time.Duration, watchdog bool) locker {
			rdb := newRDB()
			c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithOwner(owner), lock.WithTTL(ttl),
				lock.WithWatchdog(watchdog), lock.WithWantedNotices(true))
			t.Cleanup(func() { c.Close(); rdb.Close() })
			return redisLocker{c}
		},
		drop: func(t *testing.T, key string) {
			if err := admin.Del(context.Background(), prefix+key).Err(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func standaloneBackend(t *testing.T) backend {
	_, prefix := sharedRedis(t) // its keys deleted when the test ends
	return redisBackend(t, prefix, func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: sharedAddr}) })
}

func sentinelBackend(t *testing.T) backend {
	g := testenv.StartSentinelGroup(t, 1)
	return redisBackend(t, "lock:", func() redis.UniversalClient {
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.Name, SentinelAddrs: g.SentinelAddrs()})
	})
}

func clusterBackend(t *testing.T) backend {
	cl := testenv.StartCluster(t, 3, 0)
	return redisBackend(t, "lock:", func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()}) })
}

func redlockBackend(t *testing.T) backend {
	srvs := startCluster(t, 3)
	prefix := testenv.Name("conformance") + ":"
	admin := clientsOf(srvs)
	const why = "go-redsync "
	return backend{
		client: func(t *testing.T, owner string, ttl time.Duration, watchdog bool) locker {
			return redisLocker{lock.NewRedlock(clientsOf(srvs), lock.WithPrefix(prefix), lock.WithOwner(owner),
				lock.WithTTL(ttl), lock.WithWatchdog(watchdog))}
		},
		drop: func(t *testing.T, key string) {
			for _, rdb := range admin {
				if err := rdb.Del(context.Background(), prefix+key).Err(); err != nil {
					t.Fatal(err)
				}
			}
		},
		noFence:   "no fence: independent masters cannot issue one increasing sequence (Fence() is 0)",
		noNotices: "no wanted notices: " + why + "obtains publish nothing and leave no mark",
	}
}

// zkLocker adapts a *zookeeper.Client to the suite.
type zkLocker struct{ *zookeeper.Client }

func (c zkLocker) Obtain(ctx context.Context, key string) (held, error) {
	l, err := c.Client.Obtain(ctx, key)
	if err != nil {
		return nil, err
	}
	return zkHeld{l}, nil
}

func (c zkLocker) List(ctx context.Context) ([]string, error) { return c.Keys(ctx, 1000) }

// zkHeld is a held ZooKeeper lock; its token is its node's name.
type zkHeld struct{ *zookeeper.Lock }

func (l zkHeld) Token() string {
	n := l.Node()
	return n[strings.LastIndexByte(n, '/')+1:]
}

func zooKeeperBackend(t *testing.T) backend {
	if why := testenv.ZooKeeperMissing(); why != "" {
		t.Skip(why)
	}
	z := testenv.StartZooKeeperEnsemble(t, 3)
	root := "/" + testenv.Name("conformance")
	admin := testenv.ZKConn(t, z.Addrs(), zkSession, nil)
	const session = "the lease is the session: "
	return backend{
		client: func(t *testing.T, owner string, _ time.Duration, _ bool) locker {
			conn := testenv.ZKConn(t, z.Addrs(), zkSession, nil)
			return zkLocker{zookeeper.New(conn, zookeeper.Options{Root: root, Owner: owner})}
		},
		drop: func(t *testing.T, key string) {
			dir := root + "/" + url.PathEscape(key)
			children, _, err := admin.Children(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range children {
				if err := admin.Delete(dir+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					t.Fatal(err)
				}
			}
		},
		noExpiry:  session + "it ends when the holder's session expires (TestZooKeeper_SessionExpiryLosesTheLock in lock/zookeeper cuts one)",
		noExtend:  session + "there is nothing to extend",
		noNotices: "no wanted notices: a waiter's node is watched by the next waiter, not by the holder",
	}
}
