package lock

import (
	"context"
	"slices"
)

// slot is a Client's per-key right to compete for the key in Redis and hold
// it. One goroutine owns a busy slot; the others wait in FIFO order, each on
// a channel the owner closes to hand it over, without polling Redis.
type slot struct {
	busy    bool
	waiters []chan struct{}
}

// enter takes the slot for key, queueing behind at most queueMax others. It
// fails at once with ErrQueueFull when the queue is full, and with ctx's
// error when ctx is done first.
func (c *Client) enter(ctx context.Context, key string) error {
	c.mu.Lock()
	s := c.slots[key]
	if s == nil {
		s = &slot{}
		c.slots[key] = s
	}
	if !s.busy {
		s.busy = true
		c.mu.Unlock()
		return nil
	}
	if len(s.waiters) >= c.opts.queueMax {
		c.mu.Unlock()
		return ErrQueueFull
	}
	ready := make(chan struct{})
	s.waiters = append(s.waiters, ready)
	c.opts.observer.QueueDepth(key, len(s.waiters))
	holder := c.held[c.opts.prefix+key]
	c.mu.Unlock()
	if holder != nil {
		holder.markWanting()
	}

	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}

	c.mu.Lock()
	i := slices.Index(s.waiters, ready)
	if i < 0 {
		// The slot was handed to us while ctx expired: pass it on.
		c.mu.Unlock()
		c.leave(key)
		return ctx.Err()
	}
	s.waiters = slices.Delete(s.waiters, i, i+1)
	c.opts.observer.QueueDepth(key, len(s.waiters))
	c.mu.Unlock()
	return ctx.Err()
}

// leave hands the slot for key to the longest waiting goroutine, or frees it.
func (c *Client) leave(key string) {
	c.mu.Lock()
	s := c.slots[key]
	if len(s.waiters) == 0 {
		delete(c.slots, key)
		c.mu.Unlock()
		return
	}
	next := s.waiters[0]
	s.waiters[0] = nil
	s.waiters = s.waiters[1:]
	c.opts.observer.QueueDepth(key, len(s.waiters))
	if len(s.waiters) == 0 {
		s.waiters = nil // let the backing array go
	}
	c.mu.Unlock()
	close(next)
}

// waitedFor reports whether a goroutine of this Client waits for key.
func (c *Client) waitedFor(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slots[key]
	return s != nil && len(s.waiters) > 0
}
