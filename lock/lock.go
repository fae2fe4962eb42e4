// Package lock implements a distributed lock (a lease) on Redis, for
// cutting contention, not for guaranteeing correctness on its own.
//
// A Client obtains a lease with one atomic SET NX PX, identified by a random
// 130-bit token, and releases or refreshes it with a Lua script that first
// checks the token, so a holder whose lease expired cannot free or extend the
// next holder's. With a single Redis (New) every successful Obtain also
// returns a fencing token, strictly increasing per key, that a resource can
// use to reject writes from a stale holder. NewRedlock spreads the lease over
// independent Redis masters with the Redlock algorithm (go-redsync), which
// has no fencing.
//
// Within one Client (one process), at most one goroutine per key competes in
// Redis at a time; the others wait in a bounded FIFO queue and are handed the
// key when it is released. Obtain fails fast with ErrUnavailable when Redis
// cannot be reached, so a caller can tell "Redis is down" from "someone else
// has the lock" (ErrNotObtained), and joins ErrContended when that someone
// was seen alive (the lease renewed or passed on) during the wait. A Client
// that releases a key another Client was refused lets that one go first.
//
// A lease can always be lost behind its holder's back (GC pause, network
// delay, clock jump, failover). Keep the real invariant in the resource: a
// conditional write checked against a version or the fencing token. See
// docs/locking.md.
package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors returned by this package. Check them with errors.Is: they are often
// wrapped with a cause, and context errors are joined to them.
var (
	// ErrNotObtained means the lock is held by someone else and Obtain ran
	// out of attempts or of context before it was free.
	ErrNotObtained = errors.New("lock: not obtained")
	// ErrContended is joined with ErrNotObtained when, during the failed
	// Obtain, the lease was seen renewed or passed to a new holder: the key
	// is busy with live holders, not held by a dead one that its lease
	// will free (only a single-Redis Client can tell; Redlock never says
	// so).
	ErrContended = errors.New("lock: contended by live holders")
	// ErrQueueFull means too many goroutines of this Client already wait for
	// the key (see WithQueueMax). No Redis round trip was made.
	ErrQueueFull = errors.New("lock: wait queue full")
	// ErrNotHeld means the lease is no longer ours: it expired (and may have
	// been taken by someone else) or the Lock was already released.
	ErrNotHeld = errors.New("lock: not held")
	// ErrUnavailable means the lock's store could not be reached: Redis
	// (or, in Redlock mode, too many of its nodes to reach a quorum), or
	// the ZooKeeper ensemble. The wrapped cause names which. It never
	// means contention; a caller may fall back to a path that does not
	// need the lock.
	ErrUnavailable = errors.New("lock: store unavailable")
	// ErrNotReplicated means the master granted the lease but fewer replicas
	// than WithMinReplicas asked for acknowledged it in time. It is always
	// wrapped in ErrUnavailable: the lease was released (best effort) and
	// not obtained, because a failover now could hand it to someone else.
	ErrNotReplicated = errors.New("lock: not acknowledged by enough replicas")
)

// errTaken is what a backend reports when someone else holds the key.
var errTaken = errors.New("lock: taken")

// takenError is errTaken with the holder's remaining time to live, as the
// server measured it.
type takenError struct{ ttl time.Duration }

func (e *takenError) Error() string        { return errTaken.Error() }
func (e *takenError) Is(target error) bool { return target == errTaken }

// liveness tells, from the remaining TTLs of the lease a contender finds in
// its way, whether that lease was renewed or replaced meanwhile: without
// either it can only shrink by the time between the server's two readings,
// which is at least the time from the end of the first attempt to the start
// of the second.
type liveness struct {
	ttl  time.Duration // at the previous attempt; < 0 before the first
	end  time.Time     // when the previous attempt's answer arrived
	live bool
}

func (l *liveness) observe(err error, start, end time.Time) {
	var t *takenError
	if !errors.As(err, &t) {
		l.ttl = -1
		return
	}
	// PTTL is in whole milliseconds: allow one for the rounding.
	if l.ttl >= 0 && t.ttl > l.ttl-start.Sub(l.end)+time.Millisecond {
		l.live = true
	}
	l.ttl, l.end = t.ttl, end
}

// notObtained is the error of an Obtain that gave up because someone else
// held the key; cause (may be nil) is joined to it.
func (l *liveness) notObtained(cause error) error {
	err := ErrNotObtained
	if l.live {
		err = fmt.Errorf("%w: %w", ErrNotObtained, ErrContended)
	}
	if cause == nil {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// unavailableAttempts is how many consecutive attempts that cannot reach
// Redis Obtain makes before giving up with ErrUnavailable.
const unavailableAttempts = 2

// backend is a lease store: one Redis (fenced) or several (Redlock).
type backend interface {
	// obtain takes the lease, returning the fencing token (0 without
	// fencing), errTaken when held by someone else, or an error wrapping
	// ErrUnavailable when the store cannot be reached.
	obtain(ctx context.Context, key, token string, ttl time.Duration) (int64, error)
	// release deletes the lease if it is still ours, else ErrNotHeld;
	// wanted reports that another client was refused the key meanwhile.
	release(ctx context.Context, key, token string) (wanted bool, err error)
	// keep extends the lease to ttl if it is still ours (else ErrNotHeld)
	// and no other client was refused it lately; when one was (wanted),
	// it deletes the lease instead. A backend that cannot tell releases.
	keep(ctx context.Context, key, token string, ttl time.Duration) (kept, wanted bool, err error)
	// refresh extends the lease to ttl if it is still ours, else
	// ErrNotHeld; wanted reports that another client was refused it lately.
	refresh(ctx context.Context, key, token string, ttl time.Duration) (wanted bool, err error)
	// listen calls wanted with each key a refused obtain names, until stop
	// is called; nil when the backend cannot tell.
	listen(wanted func(key string)) (stop func() error)
	// inspect reads the lease without changing it (inspect.go).
	inspect(ctx context.Context, key string, renewedAbove time.Duration) (State, error)
	// stores returns the Redis clients the leases live on (keys.go).
	stores() []redis.UniversalClient
}

// Client obtains locks. It is safe for concurrent use; create one per Redis
// setup and share it, since its local wait queues only work within a Client.
type Client struct {
	be   backend
	opts options

	mu     sync.Mutex
	slots  map[string]*slot
	yields map[string]time.Time // key → until when its next Obtain waits (yield.go)
	held   map[string]*Lock     // Redis key → its Lock, while held (with notices)

	listening  sync.Once
	stopListen func() error // nil until the first Obtain, or without notices
}

// New returns a Client that keeps its leases in one Redis (standalone,
// Sentinel-managed or Cluster) and issues fencing tokens. The Client does not
// own rdb: closing it is the caller's job.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	o := newOptions(opts)
	s := &single{rdb: rdb, fenceTTL: o.fenceTTL, wantedTTL: wantedTTL(o),
		minReplicas: o.minReplicas, replicaTO: o.replicaTO, listenTO: o.attemptTO}
	if o.notices {
		s.notices = o.prefix + noticeChannel
	}
	return newClient(s, o)
}

func newClient(be backend, o options) *Client {
	return &Client{be: be, opts: o, slots: make(map[string]*slot), yields: make(map[string]time.Time),
		held: make(map[string]*Lock)}
}

// Close ends the Client's subscription to wanted notices (WithWantedNotices),
// if it has one. Locks still held stay held; their holders no longer hear
// that they are wanted except through the watchdog.
func (c *Client) Close() error {
	var stop func() error
	c.listening.Do(func() {}) // no subscription starts after Close
	c.mu.Lock()
	stop, c.stopListen = c.stopListen, nil
	c.mu.Unlock()
	if stop == nil {
		return nil
	}
	return stop()
}

// listen subscribes to wanted notices, once.
func (c *Client) listen() {
	c.listening.Do(func() {
		stop := c.be.listen(c.noticeWanted)
		c.mu.Lock()
		c.stopListen = stop
		c.mu.Unlock()
	})
}

// noticeWanted tells the holder of rkey, if this Client holds it, that
// someone else wants it.
func (c *Client) noticeWanted(rkey string) {
	c.mu.Lock()
	l := c.held[rkey]
	c.mu.Unlock()
	if l != nil {
		l.markWanting()
	}
}

// Obtain takes the lock for key, retrying with back-off while someone else
// holds it (see WithRetry), after waiting its turn behind other goroutines of
// this Client that want the same key (see WithQueueMax).
//
// It returns ErrQueueFull at once when the local queue is full;
// ErrNotObtained when attempts run out; ErrNotObtained joined with ctx.Err()
// when ctx is done first; and ErrUnavailable, after at most two attempts,
// when Redis cannot be reached (see WithAttemptTimeout). Every returned Lock
// must be released, even after it was lost, to free the local slot.
func (c *Client) Obtain(ctx context.Context, key string) (*Lock, error) {
	start := time.Now()
	l, attempts, err := c.obtain(ctx, key)
	c.opts.observer.Obtained(key, attempts, time.Since(start), err)
	return l, err
}

func (c *Client) obtain(ctx context.Context, key string) (*Lock, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrNotObtained, err)
	}
	if err := c.enter(ctx, key); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, 0, fmt.Errorf("%w: %w", ErrNotObtained, err)
		}
		return nil, 0, err
	}
	if err := c.awaitTurn(ctx, key); err != nil {
		c.leave(key)
		return nil, 0, fmt.Errorf("%w: %w", ErrNotObtained, err)
	}
	l, attempts, err := c.compete(ctx, key)
	if err != nil {
		c.leave(key)
		return nil, attempts, err
	}
	return l, attempts, nil
}

// compete runs the Redis side of Obtain while this goroutine owns the slot.
// When it fails after an attempt whose outcome it never heard (a timeout,
// a lost reply, replicas that did not acknowledge), it releases the lease
// by token, best effort: that attempt's SET may have landed, and an orphan
// would block every other contender for a whole TTL.
func (c *Client) compete(ctx context.Context, key string) (*Lock, int, error) {
	rkey := c.opts.prefix + key
	token := ownerToken(c.opts.owner) // 130 random bits, after the owner's name
	l, attempts, uncertain, err := c.attempt(ctx, key, rkey, token)
	if err != nil && uncertain {
		c.abandon(ctx, rkey, token)
	}
	return l, attempts, err
}

// attempt retries the backend until it grants the lease or Obtain must give
// up. uncertain reports whether some attempt ended without a clear answer.
func (c *Client) attempt(ctx context.Context, key, rkey, token string) (l *Lock, attempts int, uncertain bool, err error) {
	var (
		down    int   // consecutive attempts that could not reach Redis
		lastErr error // wrapping ErrUnavailable, if the last attempt failed so
		timer   *time.Timer
		held    = liveness{ttl: -1}
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		attempts++
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, c.opts.attemptTO+c.opts.replicaTO)
		fence, err := c.be.obtain(actx, rkey, token, c.opts.ttl)
		cancel()
		if err != nil && !errors.Is(err, errTaken) {
			uncertain = true
		}
		held.observe(err, start, time.Now())
		switch {
		case err == nil:
			return c.newLock(key, rkey, token, fence, start), attempts, uncertain, nil
		case ctx.Err() != nil:
			return nil, attempts, uncertain, held.notObtained(ctx.Err())
		case errors.Is(err, errTaken):
			down, lastErr = 0, nil
		case errors.Is(err, ErrUnavailable):
			down++
			lastErr = err
			if down >= unavailableAttempts {
				return nil, attempts, uncertain, err
			}
		default:
			return nil, attempts, uncertain, err
		}
		if c.opts.maxAttempts > 0 && attempts >= c.opts.maxAttempts {
			if lastErr != nil {
				return nil, attempts, uncertain, lastErr
			}
			return nil, attempts, uncertain, held.notObtained(nil)
		}

		d := c.backoff(attempts)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			if lastErr != nil {
				return nil, attempts, uncertain, fmt.Errorf("%w: %w", lastErr, ctx.Err())
			}
			return nil, attempts, uncertain, held.notObtained(ctx.Err())
		}
	}
}

// randomToken returns 26 base32 characters: 130 bits from crypto/rand.
func randomToken() string { return rand.Text() }

// backoff returns the delay after the given failed attempt (1-based):
// uniform in [0, min(maxBackoff, minBackoff*2^(attempt-1))] ("full jitter").
func (c *Client) backoff(attempt int) time.Duration {
	ceiling := c.opts.maxBackoff
	if shift := attempt - 1; shift < 32 {
		ceiling = min(ceiling, c.opts.minBackoff<<shift)
	}
	return mrand.N(ceiling + 1)
}

// abandon deletes a lease we might have obtained without hearing about it.
// It runs on its own short deadline because ctx may be done already.
func (c *Client) abandon(ctx context.Context, rkey, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(c.opts.attemptTO, 100*time.Millisecond))
	defer cancel()
	// Best effort: if this fails too, the lease expires after its TTL.
	_, _ = c.be.release(ctx, rkey, token)
}

func (c *Client) newLock(key, rkey, token string, fence int64, start time.Time) *Lock {
	l := &Lock{
		c:     c,
		key:   key,
		rkey:  rkey,
		token: token,
		fence: fence,
		lost:  make(chan struct{}),
	}
	if c.opts.notices {
		l.wanting = make(chan struct{})
		c.mu.Lock()
		c.held[rkey] = l
		c.mu.Unlock()
		c.listen()
	}
	if c.opts.watchdog {
		ctx, cancel := context.WithCancel(context.Background())
		l.stopWatchdog = cancel
		l.watchdogDone = make(chan struct{})
		go l.watch(ctx, c.opts.ttl, start.Add(c.opts.ttl))
	}
	return l
}

// Lock is a held lease. Its methods are safe for concurrent use.
type Lock struct {
	c     *Client
	key   string
	rkey  string
	token string
	fence int64
	lost  chan struct{}

	released     atomic.Bool
	wanted       atomic.Bool
	wanting      chan struct{} // closed once someone else wants the key; nil without notices
	wantingOnce  sync.Once
	stopWatchdog context.CancelFunc // nil without watchdog
	watchdogDone chan struct{}
}

// Key returns the key the Lock was obtained for, without the Client's prefix.
func (l *Lock) Key() string { return l.key }

// Token returns the value that identifies this lease in Redis: the Client's
// owner name (WithOwner) and a colon, then 130 random bits from crypto/rand.
func (l *Lock) Token() string { return l.token }

// Fence returns the fencing token issued with this lease: per key, strictly
// greater than every fence issued before it, so no two leases share one. A
// resource may therefore accept a fence equal to the highest it has seen:
// that is the same lease writing again. After a Sentinel or Cluster
// failover that lost the counter's last increments the order still holds
// as long as the new master's clock is not behind the old one's by more
// than the failover took (see docs/locking.md). It is 0 in Redlock mode,
// where independent masters cannot agree on an order.
func (l *Lock) Fence() int64 { return l.fence }

// Wanted reports whether, when the Lock was released, another Client had
// been refused the key shortly before (within twice the back-off cap): then
// this Client's next Obtain of the key yields to it first (see Release).
// It is false before the release and in Redlock mode.
func (l *Lock) Wanted() bool { return l.wanted.Load() }

// Wanting returns a channel closed once someone else is found to want the
// key while this Lock holds it: another Client was refused it (heard at once
// through the Client's wanted notices, and at the watchdog's next renewal),
// or a goroutine of this Client started waiting for it. A holder may then
// let the key go sooner than it planned, and keep it while the channel stays
// open. It is nil, never closed, for a Client without WithWantedNotices and
// in Redlock mode: then nothing says that nobody wants the key.
func (l *Lock) Wanting() <-chan struct{} { return l.wanting }

func (l *Lock) markWanting() {
	if l.wanting != nil {
		l.wantingOnce.Do(func() { close(l.wanting) })
	}
}

// forget removes the Lock from its Client's held locks.
func (l *Lock) forget() {
	if l.wanting == nil {
		return
	}
	l.c.mu.Lock()
	if l.c.held[l.rkey] == l {
		delete(l.c.held, l.rkey)
	}
	l.c.mu.Unlock()
}

// Lost returns a channel the watchdog closes when it finds the lease gone,
// or cannot renew it before it would expire. Without WithWatchdog it is never
// closed, which does not mean the lease is still held.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Release deletes the lease if it is still ours, stops the watchdog and hands
// the key to the next local waiter. When another Client was refused the key
// meanwhile (Wanted), this Client's next Obtain of it waits 1.25 times the
// back-off cap (at most the TTL) before its first attempt, so that the waiter, which retries
// within that cap, finds the key free; otherwise a holder that releases and
// obtains again at once would nearly always win against waiters asleep in
// their back-off. It returns ErrNotHeld if the lease had
// expired (leaving any new holder's lease untouched) or was already released,
// and an error wrapping ErrUnavailable if Redis could not be reached, in which
// case the lease expires after its TTL. The local slot is freed in every case.
func (l *Lock) Release(ctx context.Context) error {
	if !l.released.CompareAndSwap(false, true) {
		return ErrNotHeld
	}
	defer l.c.leave(l.key)
	l.forget()
	l.stop()
	actx, cancel := context.WithTimeout(ctx, l.c.opts.attemptTO)
	defer cancel()
	wanted, err := l.c.be.release(actx, l.rkey, l.token)
	if wanted {
		l.wanted.Store(true)
		l.c.yield(l.key)
	}
	if err != nil && !errors.Is(err, ErrNotHeld) && ctx.Err() != nil {
		return fmt.Errorf("lock: release: %w", ctx.Err())
	}
	return err
}

// Keep extends the lease to the Client's TTL from now, keeping its fence,
// unless someone else wants the key: another Client was refused it within
// twice the back-off cap (Wanted), or a goroutine of this Client waits
// for it. It reports whether the lease is still held. If not, the Lock is
// released as Release does (and yields to the waiter), also in Redlock
// mode, which cannot tell whether the key is wanted; the error says why a
// lease that was not kept could not be released. One round trip: a holder
// that would release and obtain again (two, and a new fence) when nobody
// waits keeps its lease instead.
func (l *Lock) Keep(ctx context.Context) (bool, error) {
	if l.released.Load() {
		return false, ErrNotHeld
	}
	if l.c.waitedFor(l.key) {
		return false, l.Release(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, l.c.opts.attemptTO)
	kept, wanted, err := l.c.be.keep(actx, l.rkey, l.token, l.c.opts.ttl)
	cancel()
	switch {
	case kept:
		return true, nil
	case err != nil && !errors.Is(err, ErrNotHeld):
		return false, l.Release(ctx) // unreachable: try once more, as a release
	case !l.released.CompareAndSwap(false, true):
		return false, ErrNotHeld
	}
	defer l.c.leave(l.key)
	l.forget()
	l.stop()
	if wanted {
		l.wanted.Store(true)
		l.c.yield(l.key)
	}
	return false, err
}

// Refresh extends the lease to ttl from now if it is still ours. It returns
// ErrNotHeld if the lease expired or the Lock was released, and an error
// wrapping ErrUnavailable if Redis could not be reached. The watchdog, if on,
// keeps renewing with the Client's TTL.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l.released.Load() {
		return ErrNotHeld
	}
	actx, cancel := context.WithTimeout(ctx, l.c.opts.attemptTO)
	defer cancel()
	wanted, err := l.c.be.refresh(actx, l.rkey, l.token, max(ttl, time.Millisecond))
	if wanted {
		l.markWanting()
	}
	if err != nil && !errors.Is(err, ErrNotHeld) && ctx.Err() != nil {
		err = fmt.Errorf("lock: refresh: %w", ctx.Err())
	}
	l.c.opts.observer.Refreshed(l.key, err)
	return err
}

// stop ends the watchdog and waits for it, so that no renewal races with the
// release that follows.
func (l *Lock) stop() {
	if l.stopWatchdog == nil {
		return
	}
	l.stopWatchdog()
	<-l.watchdogDone
}

// watch renews the lease every ttl/3 until ctx is cancelled. It closes lost
// when a renewal finds the lease gone, or when renewals have failed for so
// long that the lease may have expired before the next one.
func (l *Lock) watch(ctx context.Context, ttl time.Duration, validUntil time.Time) {
	defer close(l.watchdogDone)
	period := max(ttl/3, time.Millisecond)
	t := time.NewTimer(period)
	defer t.Stop()
	obs := l.c.opts.observer
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, min(period, l.c.opts.attemptTO))
		wanted, err := l.c.be.refresh(rctx, l.rkey, l.token, ttl)
		cancel()
		if wanted {
			l.markWanting()
		}
		if ctx.Err() != nil {
			return // released meanwhile; the outcome no longer matters
		}
		obs.Refreshed(l.key, err)
		switch {
		case err == nil:
			validUntil = start.Add(ttl)
		case errors.Is(err, ErrNotHeld), time.Until(validUntil) <= period:
			close(l.lost)
			obs.LeaseLost(l.key)
			return
		}
		t.Reset(period)
	}
}
