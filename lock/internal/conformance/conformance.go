// Package conformance is the lock contract, written once and run against
// every backend on real servers: the Redis ones by package lock's tests,
// ZooKeeper by lock/zookeeper's. A backend that cannot meet a clause skips
// it, saying why; docs/locking.md lists the same.
package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/locktest"
)

// Locker is what the suite asks of a backend's client.
type Locker interface {
	Obtain(ctx context.Context, key string) (Held, error)
	Inspect(ctx context.Context, key string) (lock.State, error)
	// List returns the keys the store may hold a lease for.
	List(ctx context.Context) ([]string, error)
}

// Held is what the suite asks of a held lock.
type Held interface {
	Fence() int64
	Lost() <-chan struct{}
	Release(ctx context.Context) error
	Token() string
}

// Backend builds clients of one lock store.
type Backend struct {
	// Client returns a new client, as another process would have (its own
	// connections or session), naming its leases owner. Redis leases last
	// ttl, renewed by a watchdog when watchdog; ZooKeeper's last the session.
	Client func(t *testing.T, owner string, ttl time.Duration, watchdog bool) Locker
	// Drop deletes key's lease behind its holder's back.
	Drop func(t *testing.T, key string)
	// The clauses the backend cannot meet, with the reason ("" meets it).
	NoFence, NoExpiry, NoExtend, NoNotices string
}

// Run runs every clause of the contract against b, each as a subtest.
func Run(t *testing.T, b Backend) {
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
func contractKey(t *testing.T) string { return "{" + locktest.Name("k") + "}" }

// contractMutualExclusion: goroutines of three clients released at once
// never hold the key together, every Obtain succeeds, and fences strictly
// increase in the order of holding.
func contractMutualExclusion(t *testing.T, b Backend) {
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
		c := b.Client(t, "c"+string(rune('0'+i)), contractTTL, false)
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
	if b.NoFence != "" {
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
func contractTokenChecked(t *testing.T, b Backend) {
	ctx, key := contractCtx(t), contractKey(t)
	a, c := b.Client(t, "a", contractTTL, false), b.Client(t, "b", contractTTL, false)
	la, err := a.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	b.Drop(t, key)
	obtain(ctx, t, c, key) // b holds it now
	if err := la.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release by the lease's former holder = %v; want ErrNotHeld", err)
	}
	if r, ok := la.(interface {
		Refresh(context.Context, time.Duration) error
	}); ok && b.NoExtend == "" {
		if err := r.Refresh(ctx, contractTTL); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Refresh by the lease's former holder = %v; want ErrNotHeld", err)
		}
	}
	st := inspect(ctx, t, c, key)
	if !st.Held || st.Owner != "b" {
		t.Errorf("after the former holder's release and extend: %+v; want held by b", st)
	}
	if b.NoExtend != "" {
		t.Skip("extend: " + b.NoExtend)
	}
}

// contractLeaseExpiry: a lease its holder neither releases nor renews
// ends after its TTL, and another client obtains the key.
func contractLeaseExpiry(t *testing.T, b Backend) {
	if b.NoExpiry != "" {
		t.Skip(b.NoExpiry)
	}
	ctx, key := contractCtx(t), contractKey(t)
	gone := b.Client(t, "gone", 300*time.Millisecond, false)
	lg, err := gone.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	next := b.Client(t, "next", contractTTL, false)
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
func contractFenceMonotonic(t *testing.T, b Backend) {
	if b.NoFence != "" {
		t.Skip(b.NoFence)
	}
	ctx, key := contractCtx(t), contractKey(t)
	cs := []Locker{b.Client(t, "a", contractTTL, false), b.Client(t, "b", contractTTL, false)}
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
		st := inspect(ctx, t, c, key)
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
func contractLossSignalled(t *testing.T, b Backend) {
	ctx, key := contractCtx(t), contractKey(t)
	c := b.Client(t, "a", time.Second, true)
	l := obtain(ctx, t, c, key)
	b.Drop(t, key)
	select {
	case <-l.Lost():
	case <-ctx.Done():
		t.Fatal("Lost not closed within a minute of the lease's deletion")
	}
}

// contractContextCancellation: an Obtain of a held key returns
// ErrNotObtained joined with the context's error, and leaves the holder's
// lease as it was.
func contractContextCancellation(t *testing.T, b Backend) {
	ctx, key := contractCtx(t), contractKey(t)
	a, c := b.Client(t, "a", contractTTL, false), b.Client(t, "b", contractTTL, false)
	obtain(ctx, t, a, key)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if lb, err := c.Obtain(short, key); !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		if lb != nil {
			lb.Release(ctx)
		}
		t.Fatalf("Obtain of a held key until the deadline = %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	st := inspect(ctx, t, a, key)
	if !st.Held || st.Owner != "a" {
		t.Errorf("after the refused Obtain: %+v; want still held by a", st)
	}
}

// contractWantedNotices: a holder hears that another client was refused
// its key.
func contractWantedNotices(t *testing.T, b Backend) {
	if b.NoNotices != "" {
		t.Skip(b.NoNotices)
	}
	ctx, key := contractCtx(t), contractKey(t)
	a, c := b.Client(t, "a", contractTTL, false), b.Client(t, "b", contractTTL, false)
	la := obtain(ctx, t, a, key)
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
func contractInspection(t *testing.T, b Backend) {
	ctx, key := contractCtx(t), contractKey(t)
	a := b.Client(t, "a", contractTTL, false)
	if st, err := a.Inspect(ctx, key); err != nil || st.Held {
		t.Fatalf("Inspect(a key never taken) = %+v, %v; want free", st, err)
	}
	la, err := a.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	inspectHolder(ctx, t, b, a, key, la)
	inspectHandover(ctx, t, b, a, key, la)
}

// inspectHolder checks what Inspect says of la, held by a: its owner, a
// prefix of its token, its fence and since, and a lease left that
// inspection does not extend.
func inspectHolder(ctx context.Context, t *testing.T, b Backend, a Locker, key string, la Held) {
	t.Helper()
	first := inspect(ctx, t, a, key)
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
	if b.NoFence == "" && first.Fence != la.Fence() {
		t.Errorf("Inspect fence %d; want the holder's %d", first.Fence, la.Fence())
	}
	if d := time.Since(first.Since); b.NoFence == "" && (d < -time.Minute || d > time.Minute) {
		t.Errorf("Inspect: held since %v; want about now (same machine's clock)", first.Since)
	}
	if b.NoExpiry == "" {
		second := inspect(ctx, t, a, key)
		if first.LeaseLeft <= 0 || second.LeaseLeft > first.LeaseLeft {
			t.Errorf("lease left %v, then %v; want positive and not extended by inspection", first.LeaseLeft, second.LeaseLeft)
		}
	}
}

// inspectHandover checks Inspect while a second goroutine of a waits for
// the key, then after la's release hands the key over to it, then once
// the key is free.
func inspectHandover(ctx context.Context, t *testing.T, b Backend, a Locker, key string, la Held) {
	t.Helper()
	next := make(chan Held, 1)
	go func() {
		l, err := a.Obtain(ctx, key)
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	for {
		st := inspect(ctx, t, a, key)
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
	st := inspect(ctx, t, a, key)
	if _, tok := lock.SplitToken(ln.Token()); !st.Held || st.Token != tok || st.Waiters != 0 {
		t.Errorf("Inspect(next holder) = %+v; want held with token %q, no waiter", st, tok)
	}
	if b.NoFence == "" && st.Fence <= la.Fence() {
		t.Errorf("next holder's fence %d; want above the first's %d", st.Fence, la.Fence())
	}
	if err := ln.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Inspect(ctx, key); err != nil || st.Held {
		t.Errorf("Inspect(released) = %+v, %v; want free", st, err)
	}
}

// inspect is c's view of key; an error ends the test.
func inspect(ctx context.Context, t *testing.T, c Locker, key string) lock.State {
	t.Helper()
	st, err := c.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// obtain is c's lease on key, released when the test ends; an error ends
// the test.
func obtain(ctx context.Context, t *testing.T, c Locker, key string) Held {
	t.Helper()
	l, err := c.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release(ctx) })
	return l
}
