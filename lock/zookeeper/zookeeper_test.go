package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/locktest"
	"github.com/seckill/seckill/lock/zookeeper"
	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

// zkSession is the session timeout of the tests' clients: the service's
// default (zookeeper.session_timeout).
const zkSession = 6 * time.Second

func startZK(t *testing.T) (*zktest.ZooKeeper, string) {
	t.Helper()
	z := zktest.Start(t)
	return z, "/" + locktest.Name("locktest")
}

// TestZooKeeper_FIFOWithoutHerd queues n clients, each on its own session,
// behind a holder, then releases one after the other: each holds in the
// order it queued, and each release wakes exactly one waiter (counted from
// the watch events every session receives).
func TestZooKeeper_FIFOWithoutHerd(t *testing.T) {
	z, root := startZK(t)
	const n = 8
	var (
		mu      sync.Mutex
		watched [n][]string // paths of the watch events each session received
		locks   [n]*zookeeper.Client
		conns   [n]*zk.Conn
	)
	for i := range n {
		conns[i] = zktest.Conn(t, z.Addrs(), zkSession, func(ev zk.Event) {
			if ev.Type != zk.EventSession && strings.HasPrefix(ev.Path, root) {
				mu.Lock()
				watched[i] = append(watched[i], ev.Path)
				mu.Unlock()
			}
		})
		locks[i] = zookeeper.New(conns[i], zookeeper.Options{Root: root})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := locks[0].Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	dir := first.Node()[:strings.LastIndexByte(first.Node(), '/')]
	type held struct {
		i int
		l *zookeeper.Lock
	}
	nodes := [n]string{first.Node()}
	order := make(chan held, n)
	errs := make(chan error, n)
	for i := 1; i < n; i++ {
		go func() {
			l, err := locks[i].Obtain(ctx, "k")
			if err != nil {
				errs <- err
				return
			}
			order <- held{i, l}
		}()
		waitChildren(t, conns[0], dir, i+1) // queued in this order
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for want := 1; want < n; want++ {
		select {
		case h := <-order:
			if h.i != want {
				t.Errorf("client %d holds the lock %dth; want client %d (FIFO)", h.i, want, want)
			}
			nodes[h.i] = h.l.Node()
			if err := h.l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("waiters never obtained the lock")
		}
	}
	// A holder's own node is watched too (for Lost) and reports its own
	// deletion on Release: that is no wake-up.
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for i := range n {
		var woke []string
		for _, p := range watched[i] {
			if p != nodes[i] {
				woke = append(woke, p)
			}
		}
		total += len(woke)
		if i > 0 && (len(woke) != 1 || woke[0] != nodes[i-1]) {
			t.Errorf("client %d was woken by %q; want only by its predecessor's node %q", i, woke, nodes[i-1])
		}
	}
	if total != n-1 {
		t.Errorf("%d watch events for %d releases; want %d (no herd)", total, n-1, n-1)
	}
}

// waitChildren waits (bounded) until dir has want children.
func waitChildren(t *testing.T, c *zk.Conn, dir string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ch, _, err := c.Children(dir)
		if err == nil && len(ch) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d children (err %v); want %d", dir, len(ch), err, want)
		}
		time.Sleep(5 * time.Millisecond) // polling ZooKeeper's state, bounded above
	}
}

// TestZooKeeper_SessionExpiryLosesTheLock cuts a holder off from the server
// past its session timeout (as a long GC pause or a partition would): the
// ensemble deletes its node, a second client obtains the lock with a higher
// fence, and when the first reconnects its Lost channel closes and Release
// reports ErrNotHeld.
func TestZooKeeper_SessionExpiryLosesTheLock(t *testing.T) {
	z, root := startZK(t)
	proxy := locktest.StartProxyT(t, z.Addrs()[0])
	connA := zktest.Conn(t, []string{proxy.Addr}, zkSession, nil)
	a := zookeeper.New(connA, zookeeper.Options{Root: root})
	b := zookeeper.New(zktest.Conn(t, z.Addrs(), zkSession, nil), zookeeper.Options{Root: root})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	la, err := a.Obtain(ctx, "sku:7")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	lb, err := b.Obtain(ctx, "sku:7") // waits until A's session expires
	if err != nil {
		t.Fatalf("second client: %v", err)
	}
	if lb.Fence() <= la.Fence() {
		t.Errorf("fence after expiry %d <= stale holder's %d", lb.Fence(), la.Fence())
	}
	select {
	case <-la.Lost():
		t.Fatal("Lost closed while cut off: the client cannot know yet")
	default:
	}
	proxy.Restore()
	select {
	case <-la.Lost():
	case <-ctx.Done():
		t.Fatal("Lost never closed after the session expired")
	}
	if err := la.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after expiry = %v; want ErrNotHeld", err)
	}
	select {
	case <-lb.Lost():
		t.Error("the new holder's Lost closed")
	default:
	}
	if err := lb.Release(ctx); err != nil {
		t.Errorf("new holder's Release = %v", err)
	}
}

// TestZooKeeper_ObtainBoundedByContext: a waiter whose context ends gets
// ErrNotObtained joined with the context's error and leaves no node behind.
func TestZooKeeper_ObtainBoundedByContext(t *testing.T) {
	z, root := startZK(t)
	conn := zktest.Conn(t, z.Addrs(), zkSession, nil)
	lk := zookeeper.New(conn, zookeeper.Options{Root: root})
	ctx := context.Background()
	held, err := lk.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	dir := held.Node()[:strings.LastIndexByte(held.Node(), '/')]
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = lk.Obtain(short, "k")
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Obtain while held = %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	waitChildren(t, conn, dir, 1) // the abandoned waiter's node is deleted
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release = %v; want ErrNotHeld", err)
	}
}

// TestZooKeeper_ParentsDoNotAccumulate: each key's lock path is a
// container node the server deletes once its last lock node is gone.
func TestZooKeeper_ParentsDoNotAccumulate(t *testing.T) {
	z, root := startZK(t)
	conn := zktest.Conn(t, z.Addrs(), zkSession, nil)
	lk := zookeeper.New(conn, zookeeper.Options{Root: root + "/locks"})
	ctx := context.Background()
	const keys = 50
	for i := range keys {
		l, err := lk.Obtain(ctx, fmt.Sprintf("sku:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ch, _, err := conn.Children(root + "/locks")
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	if len(ch) > keys {
		t.Fatalf("%d lock parents for %d keys", len(ch), keys)
	}
	// The server sweeps containers every 500ms in the tests (every minute
	// by default): wait, bounded, for the whole tree to go.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, _, err := conn.Exists(root)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			ch, _, _ := conn.Children(root + "/locks")
			t.Fatalf("%d lock parents still there 30s after their last release", len(ch))
		}
		time.Sleep(50 * time.Millisecond) // polling the server's sweep, bounded above
	}
}

// TestZooKeeper_UnavailableFailsFast: without a session Obtain reports
// ErrUnavailable at once instead of waiting for its context.
func TestZooKeeper_UnavailableFailsFast(t *testing.T) {
	z, root := startZK(t)
	conn := zktest.Conn(t, z.Addrs(), zkSession, nil)
	lk := zookeeper.New(conn, zookeeper.Options{Root: root})
	z.Servers[0].Stop()
	deadline := time.Now().Add(30 * time.Second)
	for conn.State() == zk.StateHasSession && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling for the client to notice, bounded above
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := lk.Obtain(ctx, "k")
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Obtain with the server down = %v; want ErrUnavailable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "zookeeper") || strings.Contains(msg, "redis") {
		t.Errorf("Obtain with the server down = %q; want it to name zookeeper, not redis", msg)
	}
	if ctx.Err() != nil {
		t.Fatal("Obtain waited for its context instead of failing fast")
	}
}

// TestZooKeeper_HorizonCoversEveryFenceIssued: a holder's Horizon is no
// lower than any fence the ensemble issued before it was asked, on any key
// and to any client; asking it is no loss of the lock, nor of the name
// of its owner; a released lock has none.
func TestZooKeeper_HorizonCoversEveryFenceIssued(t *testing.T) {
	z, root := startZK(t)
	a := zookeeper.New(zktest.Conn(t, z.Addrs(), zkSession, nil), zookeeper.Options{Root: root, Owner: "instance-a"})
	b := zookeeper.New(zktest.Conn(t, z.Addrs(), zkSession, nil), zookeeper.Options{Root: root})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	la, err := a.Obtain(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Obtain(ctx, "k2")
	if err != nil {
		t.Fatal(err)
	}
	h, err := la.Horizon(ctx)
	if err != nil {
		t.Fatalf("Horizon() = %v", err)
	}
	if h < la.Fence() || h < lb.Fence() {
		t.Errorf("Horizon() = %d; want at least the fences issued before it: %d and %d", h, la.Fence(), lb.Fence())
	}
	if st, err := a.Inspect(ctx, "k1"); err != nil || st.Owner != "instance-a" {
		t.Errorf("Inspect after Horizon = %+v, %v; want the holder's owner kept", st, err)
	}
	if lc, err := b.Obtain(ctx, "k3"); err != nil {
		t.Fatal(err)
	} else if lc.Fence() <= h {
		t.Errorf("fence %d issued after Horizon() = %d; want above it", lc.Fence(), h)
	}
	if err := la.Release(ctx); err != nil {
		t.Errorf("Release after Horizon = %v; want nil (asking is no loss)", err)
	}
	select {
	case <-la.Lost():
		t.Error("Lost closed by Horizon's write to the lock's own node")
	default:
	}
	if _, err := la.Horizon(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Horizon after Release = %v; want ErrNotHeld", err)
	}
}
