package lock

import (
	"context"
	"time"
)

// maxYields bounds the keys whose yields a Client remembers; past it the
// expired ones are forgotten first.
const maxYields = 1024

// wantedTTL is the lifetime of a refused Obtain's mark on the key: twice the
// back-off cap, so it lasts between a waiter's attempts; at most a lease.
func wantedTTL(o options) time.Duration { return min(2*o.maxBackoff, o.ttl) }

// yieldFor is how long a Client that released a wanted key waits before
// trying it again: past a waiter's back-off cap, so the waiter goes first;
// at most a lease.
func yieldFor(o options) time.Duration { return min(o.maxBackoff+o.maxBackoff/4, o.ttl) }

// yield makes this Client's next Obtain of key wait its turn.
func (c *Client) yield(key string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.yields) >= maxYields {
		for k, until := range c.yields {
			if !now.Before(until) {
				delete(c.yields, k)
			}
		}
		if len(c.yields) >= maxYields {
			return // all recent: this key does without
		}
	}
	c.yields[key] = now.Add(yieldFor(c.opts))
}

// awaitTurn waits out a yield of key, or until ctx is done.
func (c *Client) awaitTurn(ctx context.Context, key string) error {
	c.mu.Lock()
	until, ok := c.yields[key]
	delete(c.yields, key)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
