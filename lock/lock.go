// Package lock is a distributed lock (a lease) on Redis, meant to cut
// contention, not to guarantee correctness on its own.
//
// New keeps leases in one Redis and issues fencing tokens; NewRedlock
// spreads them over independent masters, without fences. Each lease carries
// a random token that Release and Refresh check in Lua, so an expired
// holder cannot touch the next holder's lease. Goroutines of one Client
// queue locally, so that one per key competes in Redis.
//
// A lease can be lost behind its holder's back (GC pause, network delay,
// failover): keep the invariant in the resource, checked against the fence
// or a version. See docs/locking.md.
//
// Licensed under the MIT License (LICENSE at the repository's root).
package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors returned by this package. Check them with errors.Is: they are often
// wrapped with a cause, and context errors are joined to them.
var (
	// ErrNotObtained means someone else holds the lock and Obtain ran out of
	// attempts or of context.
	ErrNotObtained = errors.New("lock: not obtained")
	// ErrContended is joined with ErrNotObtained when the lease was seen
	// renewed or passed on during Obtain: its holders are alive, not dead and
	// about to expire. Redlock never reports it.
	ErrContended = errors.New("lock: contended by live holders")
	// ErrQueueFull means WithQueueMax goroutines of this Client already wait
	// for the key. No Redis round trip was made.
	ErrQueueFull = errors.New("lock: wait queue full")
	// ErrNotHeld means the lease is no longer ours: it expired (and may have
	// been taken by someone else) or the Lock was already released.
	ErrNotHeld = errors.New("lock: not held")
	// ErrUnavailable means the store (Redis, a Redlock quorum or ZooKeeper)
	// could not be reached; the wrapped cause says which. It never means
	// contention, so a caller may fall back to a path without the lock.
	ErrUnavailable = errors.New("lock: store unavailable")
	// ErrNotReplicated, always wrapped in ErrUnavailable, means fewer replicas
	// than WithMinReplicas acknowledged the lease in time. The lease was
	// released, since a failover could hand it to someone else.
	ErrNotReplicated = errors.New("lock: not acknowledged by enough replicas")
)

// errTaken is what a backend reports when someone else holds the key.
var errTaken = errors.New("lock: taken")

// takenError is errTaken with the holder's remaining time to live, as the
// server measured it.
type takenError struct{ ttl time.Duration }

func (e *takenError) Error() string        { return errTaken.Error() }
func (e *takenError) Is(target error) bool { return target == errTaken }

// liveness tells whether the lease in a contender's way was renewed or
// replaced between attempts: untouched, its TTL shrinks by at least the gap
// between them.
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
	// fencing), errTaken when held by someone else (or, for a ranked
	// contender, when a lower rank waits), or an error wrapping
	// ErrUnavailable when the store cannot be reached. others is the
	// lowest rank of the other contenders, noRank when none or unranked.
	obtain(ctx context.Context, key, token string, ttl time.Duration, who *contender) (fence, others int64, err error)
	// withdraw removes the contender id's rank for key.
	withdraw(ctx context.Context, key, id string) error
	// release deletes the lease if it is still ours, else ErrNotHeld;
	// wanted reports that another client was refused the key meanwhile.
	release(ctx context.Context, key, token string) (wanted bool, err error)
	// keep extends the lease to ttl if it is still ours (else ErrNotHeld),
	// unless another client was refused it lately (wanted): then it deletes
	// the lease. A backend that cannot tell releases.
	keep(ctx context.Context, key, token string, ttl time.Duration) (kept, wanted bool, err error)
	// refresh extends the lease to ttl if it is still ours, else
	// ErrNotHeld; wanted reports that another client was refused it lately.
	refresh(ctx context.Context, key, token string, ttl time.Duration) (wanted bool, err error)
	// listen calls wanted with each key a refused obtain names (with the
	// refused contender's rank, noRank when unranked) and freed with each
	// key a release of a wanted key names, until stop is called; nil when
	// the backend cannot tell.
	listen(wanted func(key string, rank int64), freed func(key string)) (stop func() error)
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
	id   string // names this Client among a key's ranked contenders

	mu     sync.Mutex
	slots  map[string]*slot
	yields map[string]time.Time     // key → until when its next Obtain waits (yield.go)
	held   map[string]*Lock         // Redis key → its Lock, while held (with notices)
	asleep map[string]chan struct{} // Redis key → its contender's wake-up, while it backs off (with notices)

	listening  sync.Once
	stopListen func() error // nil until the first Obtain, or without notices
}

// New returns a Client that keeps its leases in one Redis (standalone,
// Sentinel or Cluster) and issues fencing tokens. It does not own rdb: the
// caller closes it.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	o := newOptions(opts)
	s := &single{rdb: rdb, fenceTTL: o.fenceTTL, wantedTTL: wantedTTL(o),
		minReplicas: o.minReplicas, replicaTO: o.replicaTO, listenTO: o.attemptTO}
	if o.notices {
		s.notices = o.prefix + noticeChannel
		s.freed = o.prefix + freedChannel
	}
	return newClient(s, o)
}

func newClient(be backend, o options) *Client {
	return &Client{be: be, opts: o, id: randomToken(), slots: make(map[string]*slot), yields: make(map[string]time.Time),
		held: make(map[string]*Lock), asleep: make(map[string]chan struct{})}
}

// Close ends the Client's subscription to wanted notices, if any. Held locks
// stay held; their holders then hear that another Client wants the key only
// through the watchdog.
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
		stop := c.be.listen(c.noticeWanted, c.noticeFreed)
		c.mu.Lock()
		c.stopListen = stop
		c.mu.Unlock()
	})
}

// noticeWanted tells the holder of rkey, if this Client holds it, that
// someone else wants it, and with what rank.
func (c *Client) noticeWanted(rkey string, rank int64) {
	c.mu.Lock()
	l := c.held[rkey]
	c.mu.Unlock()
	if l != nil {
		l.heard(rank)
		l.markWanting()
	}
}

// noticeFreed wakes this Client's contender for rkey, if one backs off.
func (c *Client) noticeFreed(rkey string) {
	c.mu.Lock()
	wake := c.asleep[rkey]
	c.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// Obtain takes the lock for key, queueing behind this Client's goroutines
// for it (WithQueueMax) and retrying while someone else holds it (WithRetry).
// It returns ErrQueueFull when the queue is full, ErrNotObtained when
// attempts or ctx run out, and ErrUnavailable when two attempts cannot reach
// Redis. Release every returned Lock, even a lost one, to free its slot.
func (c *Client) Obtain(ctx context.Context, key string) (*Lock, error) {
	start := time.Now()
	l, attempts, err := c.obtain(ctx, key, nil)
	c.opts.observer.Obtained(key, attempts, time.Since(start), err)
	return l, err
}

func (c *Client) obtain(ctx context.Context, key string, who *contender) (*Lock, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrNotObtained, err)
	}
	if err := c.enter(ctx, key); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, 0, fmt.Errorf("%w: %w", ErrNotObtained, err)
		}
		return nil, 0, err
	}
	if who == nil { // a ranked contender waits its rank's turn instead
		if err := c.awaitTurn(ctx, key); err != nil {
			c.leave(key)
			return nil, 0, fmt.Errorf("%w: %w", ErrNotObtained, err)
		}
	}
	l, attempts, err := c.compete(ctx, key, who)
	if err != nil {
		c.leave(key)
		return nil, attempts, err
	}
	return l, attempts, nil
}

// compete runs the Redis side of Obtain while this goroutine owns the slot.
// If it fails after an unanswered attempt it releases by token: that SET
// may have landed, and would block every contender for a TTL.
func (c *Client) compete(ctx context.Context, key string, who *contender) (*Lock, int, error) {
	rkey := c.opts.prefix + key
	token := ownerToken(c.opts.owner) // 130 random bits, after the owner's name
	l, attempts, uncertain, err := c.attempt(ctx, key, rkey, token, who)
	if err != nil && uncertain {
		c.abandon(ctx, rkey, token)
	}
	if err != nil && who != nil && attempts > 0 && !errors.Is(err, ErrUnavailable) {
		c.withdraw(ctx, rkey) // unreachable, the rank lapses on its own (rankTTL)
	}
	return l, attempts, err
}

// attempt retries the backend until it grants the lease or Obtain must give
// up. uncertain reports whether some attempt ended without a clear answer.
func (c *Client) attempt(ctx context.Context, key, rkey, token string, who *contender) (l *Lock, attempts int, uncertain bool, err error) {
	var (
		down    int   // consecutive attempts that could not reach Redis
		lastErr error // wrapping ErrUnavailable, if the last attempt failed so
		timer   *time.Timer
		held    = liveness{ttl: -1}
		wake    <-chan struct{} // a release of the key, heard while backing off
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if wake != nil {
			c.mu.Lock()
			delete(c.asleep, rkey)
			c.mu.Unlock()
		}
	}()
	for {
		attempts++
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, c.opts.attemptTO+c.opts.replicaTO)
		fence, others, err := c.be.obtain(actx, rkey, token, c.opts.ttl, who)
		cancel()
		if err != nil && !errors.Is(err, errTaken) {
			uncertain = true
		}
		held.observe(err, start, time.Now())
		switch {
		case err == nil:
			return c.newLock(key, rkey, token, fence, others, start), attempts, uncertain, nil
		case ctx.Err() != nil:
			return nil, attempts, uncertain, held.notObtained(ctx.Err())
		case errors.Is(err, errTaken):
			down, lastErr = 0, nil
			if wake == nil && c.opts.notices {
				wake = c.sleepOn(rkey)
			}
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
		case <-wake: // nil (never ready) without notices
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
