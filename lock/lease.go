package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

func (c *Client) newLock(key, rkey, token string, fence, others int64, start time.Time) *Lock {
	l := &Lock{
		c:     c,
		key:   key,
		rkey:  rkey,
		token: token,
		fence: fence,
		lost:  make(chan struct{}),
	}
	l.others.Store(others)
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
	others       atomic.Int64  // the lowest rank another contender announced; noRank for none
	wanting      chan struct{} // closed once someone else wants the key; nil without notices
	wantingOnce  sync.Once
	stopWatchdog context.CancelFunc // nil without watchdog
	watchdogDone chan struct{}
}

// Key returns the key the Lock was obtained for, without the Client's prefix.
func (l *Lock) Key() string { return l.key }

// Token returns the lease's value in Redis: the owner name (WithOwner) and
// a colon, then 130 random bits.
func (l *Lock) Token() string { return l.token }

// Fence returns the lease's fencing token: per key, above every fence issued
// before, so a resource refuses lower ones (an equal one is this lease
// again). A failover keeps the order unless the new master's clock lags by
// more than the failover took. It is 0 with Redlock.
func (l *Lock) Fence() int64 { return l.fence }

// Wanted reports whether another Client was refused the key shortly before
// this Lock was released; this Client's next Obtain of it then yields (see
// Release). It is false before the release and with Redlock.
func (l *Lock) Wanted() bool { return l.wanted.Load() }

// Wanting returns a channel closed once someone else wants the key: another
// Client was refused it (heard through notices or the watchdog), or a
// goroutine of this Client waits. Until then the holder may keep the key.
// It is nil without WithWantedNotices and with Redlock.
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

// Lost returns a channel the watchdog closes when the lease is gone or
// cannot be renewed before it expires. Without WithWatchdog it never
// closes, which proves nothing.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Release deletes the lease if it is still ours, stops the watchdog and
// hands the key to the next local waiter. If the key was Wanted, this
// Client's next Obtain of it waits 1.25 back-off caps, to let the waiter in.
// It returns ErrNotHeld if the lease had expired or was released, and an
// error wrapping ErrUnavailable if Redis was unreachable (the lease then
// expires after its TTL).
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

// Keep extends the lease to the Client's TTL in one round trip, keeping its
// fence, and reports whether it is still held (ErrNotHeld if it was lost).
// If someone else wants the key (Wanted, or a local waiter), or with
// Redlock, it releases instead; the error says why that release failed.
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
// ErrNotHeld if the lease expired or was released, and an error wrapping
// ErrUnavailable if Redis was unreachable. The watchdog, if on, keeps
// renewing with the Client's TTL.
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

// watch renews the lease every ttl/3 until ctx is cancelled, closing lost
// when the lease is gone or renewals failed until it may have expired.
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
