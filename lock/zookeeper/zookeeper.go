// Package zookeeper is a lock client keeping its locks in ZooKeeper, with
// the contract and errors of package lock.
//
// Licensed under the MIT License (LICENSE at the repository's root).
package zookeeper

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock"
)

// Options configures a ZooKeeper lock client. The zero value gives
// the defaults.
type Options struct {
	// Root is the path under which each key gets its lock node. The default
	// is "/seckill/locks". Missing parts are created as container nodes,
	// which the server deletes once empty.
	Root string
	// OpTimeout bounds each ZooKeeper request of Obtain and Release, not the
	// wait for a predecessor (only ctx bounds that). The default is 1s. A
	// request that times out counts as lock.ErrUnavailable.
	OpTimeout time.Duration
	// Observer receives Obtained and LeaseLost events; the queue lives in
	// ZooKeeper and the session is the lease, so there is no QueueDepth or
	// Refreshed. The default is lock.NopObserver.
	Observer lock.Observer
	// FenceBase is added to every fence and horizon, so that a resource
	// fenced by several lock backends can tell whose fence it holds. The
	// default is 0: the fence is the lock node's creation zxid.
	FenceBase int64
	// Owner names this client's lock nodes (their data), so that Inspect
	// can say who holds a key. The default is "" (unnamed).
	Owner string
}

// Client obtains locks with ZooKeeper's ephemeral sequential node recipe:
// the lowest node under a key holds it, and each waiter watches only its
// predecessor, so a release wakes one waiter. The session is the lease.
//
// It is safe for concurrent use. It does not own conn.
type Client struct {
	conn *zk.Conn
	o    Options
	ab   abandoned

	mu      sync.Mutex
	waiting map[string]int // key → Obtains of this client not yet answered
}

// New returns a ZooKeeper lock client on conn (see zk.Connect: the
// session timeout given there is the lease).
func New(conn *zk.Conn, o Options) *Client {
	if o.Root == "" {
		o.Root = "/seckill/locks"
	}
	o.Root = "/" + strings.Trim(o.Root, "/")
	if o.OpTimeout <= 0 {
		o.OpTimeout = time.Second
	}
	if o.Observer == nil {
		o.Observer = lock.NopObserver{}
	}
	return &Client{conn: conn, o: o, waiting: map[string]int{}}
}

// Obtain takes the lock for key, waiting in FIFO order behind earlier
// callers of every client until ctx is done. It returns lock.ErrNotObtained
// when ctx ends first, and an error wrapping lock.ErrUnavailable at once when
// the session is down or a request times out. A failed Obtain's node is
// deleted.
func (z *Client) Obtain(ctx context.Context, key string) (*Lock, error) {
	start := time.Now()
	z.wait(key, 1)
	l, reqs, err := z.obtain(ctx, key)
	z.wait(key, -1)
	z.o.Observer.Obtained(key, reqs, time.Since(start), err)
	return l, err
}

func (z *Client) obtain(ctx context.Context, key string) (*Lock, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", lock.ErrNotObtained, err)
	}
	if key == "" {
		return nil, 0, errors.New("lock: empty key")
	}
	if st := z.conn.State(); st != zk.StateHasSession {
		return nil, 0, fmt.Errorf("%w: zookeeper session %v", lock.ErrUnavailable, st)
	}
	dir := z.o.Root + "/" + url.PathEscape(key)
	token := rand.Text()
	reqs := 0
	fail := func(err error) (*Lock, int, error) {
		z.abandon(dir, token)
		if ctx.Err() != nil {
			return nil, reqs, fmt.Errorf("%w: %w", lock.ErrNotObtained, ctx.Err())
		}
		return nil, reqs, err
	}

	var node string
	for {
		if node == "" {
			n, r, err := z.create(ctx, dir, token)
			reqs += r
			if err != nil {
				return fail(err)
			}
			node = n
		}
		reqs++
		children, err := call(ctx, z, func() ([]string, error) { c, _, err := z.conn.Children(dir); return c, err })
		if err != nil {
			return fail(err)
		}
		slices.SortFunc(children, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
		i := slices.Index(children, node[len(dir)+1:])
		switch {
		case i < 0: // the session expired while we waited: queue again
			node = ""
			continue
		case i == 0:
			type exists struct {
				ok bool
				st *zk.Stat
				ch <-chan zk.Event
			}
			reqs++
			e, err := call(ctx, z, func() (e exists, err error) { e.ok, e.st, e.ch, err = z.conn.ExistsW(node); return e, err })
			if err != nil {
				return fail(err)
			}
			if !e.ok {
				node = ""
				continue
			}
			return z.newLock(key, node, e.st.Czxid, e.ch), reqs, nil
		}
		// Watch the predecessor only. GetW sets no watch on a node that is
		// already gone (ExistsW would, and it would never fire).
		reqs++
		ch, err := call(ctx, z, func() (<-chan zk.Event, error) {
			_, _, ch, err := z.conn.GetW(dir + "/" + children[i-1])
			return ch, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}

// create makes our ephemeral sequential node under dir, creating missing
// parents as containers. The name carries token, so a node whose creation
// answer was lost can still be found and deleted.
func (z *Client) create(ctx context.Context, dir, token string) (string, int, error) {
	reqs := 0
	for range 4 { // a container swept between its creation and our child's
		reqs++
		node, err := call(ctx, z, func() (string, error) {
			return z.conn.Create(dir+"/"+token+"-", []byte(z.o.Owner), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		})
		if !errors.Is(err, zk.ErrNoNode) {
			return node, reqs, err
		}
		for _, p := range parents(dir) {
			reqs++
			_, err := call(ctx, z, func() (string, error) {
				return z.conn.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
			})
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return "", reqs, err
			}
		}
	}
	return "", reqs, fmt.Errorf("lock: zookeeper: %s keeps disappearing", dir)
}

// parents returns "/a", "/a/b", "/a/b/c" for "/a/b/c".
func parents(dir string) []string {
	var ps []string
	for i := 1; i < len(dir); i++ {
		if dir[i] == '/' {
			ps = append(ps, dir[:i])
		}
	}
	return append(ps, dir)
}

// seq returns the sequence suffix the server appended to a node name.
func seq(name string) string { return name[strings.LastIndexByte(name, '-')+1:] }

func (z *Client) deleteByToken(ctx context.Context, dir, token string) (bool, error) {
	children, err := call(ctx, z, func() ([]string, error) { c, _, err := z.conn.Children(dir); return c, err })
	if errors.Is(err, zk.ErrNoNode) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, c := range children {
		if !strings.HasPrefix(c, token+"-") {
			continue
		}
		_, err := call(ctx, z, func() (struct{}, error) { return struct{}{}, z.conn.Delete(dir+"/"+c, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return false, err
		}
	}
	return true, nil
}

// call runs one blocking ZooKeeper request, waiting at most OpTimeout and
// until ctx is done; the request itself finishes in the background, and
// its result is then dropped.
func call[T any](ctx context.Context, z *Client, req func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := req()
		done <- result{v, err}
	}()
	t := time.NewTimer(z.o.OpTimeout)
	defer t.Stop()
	var zero T
	select {
	case r := <-done:
		return r.v, zkError(r.err)
	case <-t.C:
		return zero, fmt.Errorf("%w: zookeeper: no answer within %v", lock.ErrUnavailable, z.o.OpTimeout)
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// zkError marks the errors that mean "ZooKeeper cannot be reached" with
// lock.ErrUnavailable and leaves the others (ErrNoNode, ErrNodeExists...) as
// they are, for errors.Is.
func zkError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer),
		errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosing),
		errors.Is(err, zk.ErrSessionMoved):
		return fmt.Errorf("%w: zookeeper: %w", lock.ErrUnavailable, err)
	}
	return fmt.Errorf("lock: zookeeper: %w", err)
}

func (z *Client) newLock(key, node string, czxid int64, watch <-chan zk.Event) *Lock {
	l := &Lock{
		z:     z,
		key:   key,
		node:  node,
		fence: z.o.FenceBase + czxid,
		sess:  z.conn.SessionID(),
		lost:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go l.watch(watch)
	return l
}

// Lock is a held ZooKeeper lock. Its methods are safe for
// concurrent use.
type Lock struct {
	z     *Client
	key   string
	node  string
	fence int64
	sess  int64 // the session the node lives in
	lost  chan struct{}
	done  chan struct{} // closed by Release

	released atomic.Bool
}

// Key returns the key the lock was obtained for.
func (l *Lock) Key() string { return l.key }

// Node returns the path of the lock's ephemeral sequential node.
func (l *Lock) Node() string { return l.node }

// Fence returns FenceBase plus the creation zxid of the lock's node:
// greater than every earlier holder's fence on this ensemble, for any key,
// across leader changes and restarts.
func (l *Lock) Fence() int64 { return l.fence }

// Horizon returns FenceBase plus the zxid of a write to the lock's node: at
// least every fence this ensemble issued, so a higher one came from another
// or a recreated ensemble. The write keeps the node's data (Owner). It
// returns lock.ErrNotHeld when the node is gone, or an error wrapping
// lock.ErrUnavailable.
func (l *Lock) Horizon(ctx context.Context) (int64, error) {
	if l.released.Load() {
		return 0, lock.ErrNotHeld
	}
	st, err := call(ctx, l.z, func() (*zk.Stat, error) { return l.z.conn.Set(l.node, []byte(l.z.o.Owner), -1) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0, lock.ErrNotHeld
	case err != nil:
		return 0, err
	}
	return l.z.o.FenceBase + st.Mzxid, nil
}

// Lost returns a channel closed when the lock's node is found gone while
// held: by its watch, or by a check every lostRecheck, since a watch can be
// lost silently when the connection moves to another server (go-zookeeper
// resets its watches on reconnect without reporting a failure). A client
// cut off from the ensemble learns of its session's expiry only on
// reconnecting: until then only the fence protects the resource.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// lostRecheck is how often a held lock's node is checked beside its
// watch: one Exists per held lock per period.
const lostRecheck = 2 * time.Second

// watch closes lost when the node's watch reports it deleted or the watch
// itself ended (session expired, connection closed), or a recheck finds
// the node gone.
func (l *Lock) watch(ch <-chan zk.Event) {
	tick := time.NewTicker(lostRecheck)
	defer tick.Stop()
	for {
		var ev zk.Event
		select {
		case <-l.done:
			return
		case ev = <-ch:
		case <-tick.C:
			ok, err := call(context.Background(), l.z, func() (bool, error) { ok, _, err := l.z.conn.Exists(l.node); return ok, err })
			if err != nil || ok { // unanswered: the watch or the session's end will say
				continue
			}
			ev.Type = zk.EventNodeDeleted
		}
		if ev.Type == zk.EventNodeDataChanged { // someone wrote to it: still ours, watch again
			var ok bool
			var err error
			ok, _, ch, err = l.z.conn.ExistsW(l.node)
			if err == nil && ok {
				continue
			}
		}
		if l.released.Load() {
			return
		}
		close(l.lost)
		l.z.o.Observer.LeaseLost(l.key)
		return
	}
}

// Release deletes the lock's node, waking the next waiter. It returns
// lock.ErrNotHeld if the node was already gone or released, and an error
// wrapping lock.ErrUnavailable if ZooKeeper did not answer: the node is then
// deleted in the background, or goes with the session.
func (l *Lock) Release(ctx context.Context) error {
	if !l.released.CompareAndSwap(false, true) {
		return lock.ErrNotHeld
	}
	close(l.done)
	if l.z.conn.SessionID() != l.sess { // the node went with its session
		return lock.ErrNotHeld
	}
	_, err := call(ctx, l.z, func() (struct{}, error) { return struct{}{}, l.z.conn.Delete(l.node, -1) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return lock.ErrNotHeld
	}
	dir, name := l.node[:strings.LastIndexByte(l.node, '/')], l.node[strings.LastIndexByte(l.node, '/')+1:]
	l.z.abandon(dir, name[:strings.LastIndexByte(name, '-')])
	if ctx.Err() != nil {
		return fmt.Errorf("lock: release: %w", ctx.Err())
	}
	return err
}
