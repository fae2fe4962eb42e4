package lock

import (
	"context"
	"math"
	"time"
)

// noRank is the rank of no contender: every rank is lower.
const noRank = math.MaxInt64

// contender is a ranked Obtain's place among a key's contenders.
type contender struct {
	id   string        // its Client's
	rank int64         // lower goes first
	ttl  time.Duration // how long its rank counts after each attempt
}

// rankTTL is how long a contender's rank counts after its last attempt:
// past a back-off cap and an attempt's timeout, so that it lasts between
// a live contender's attempts; at most a lease. A contender that died
// holds the others up this long at most.
func rankTTL(o options) time.Duration { return min(2*o.maxBackoff+o.attemptTO, o.ttl) }

// ObtainRanked is Obtain in order of rank: while another Client's
// ObtainRanked for key with a lower rank is waiting, a free key is not
// taken, so a released key goes to the lowest rank waiting. Ranks are
// compared as Redis sorted-set scores (exact up to ±2^53): pass, say, the
// arrival in microseconds of the oldest request the lock is for. A waiting
// contender's rank counts until its Obtain returns, or lapses 2 back-off
// caps plus an attempt timeout (at most a TTL) after its last attempt if
// its Client died. The holder hears ranks through Contender. Plain
// Obtains of the same key are not ordered; goroutines of one Client queue
// in their order of arrival, as for Obtain. With Redlock ranks are
// ignored. Errors are those of Obtain.
func (c *Client) ObtainRanked(ctx context.Context, key string, rank int64) (*Lock, error) {
	start := time.Now()
	l, attempts, err := c.obtain(ctx, key, &contender{id: c.id, rank: rank, ttl: rankTTL(c.opts)})
	c.opts.observer.Obtained(key, attempts, time.Since(start), err)
	return l, err
}

// Contender returns the lowest rank that another Client's ObtainRanked
// for the key announced while this Lock was held: when it was obtained,
// or in a wanted notice (WithWantedNotices) since. ok is false when none
// did. A contender that has since given up still counts, so the hint errs
// toward handing the key over early.
func (l *Lock) Contender() (rank int64, ok bool) {
	r := l.others.Load()
	return r, r != noRank
}

// heard lowers the rank the holder knows of to rank.
func (l *Lock) heard(rank int64) {
	for {
		cur := l.others.Load()
		if rank >= cur || l.others.CompareAndSwap(cur, rank) {
			return
		}
	}
}

// sleepOn registers a contender for rkey to be woken when a release of
// the key is heard; the caller removes it when done.
func (c *Client) sleepOn(rkey string) <-chan struct{} {
	c.listen()
	wake := make(chan struct{}, 1)
	c.mu.Lock()
	c.asleep[rkey] = wake
	c.mu.Unlock()
	return wake
}

// withdraw takes back this Client's rank for rkey after a ranked Obtain
// gave up, on its own short deadline since ctx may be done. Best effort:
// the rank lapses on its own (rankTTL).
func (c *Client) withdraw(ctx context.Context, rkey string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(c.opts.attemptTO, 100*time.Millisecond))
	defer cancel()
	_ = c.be.withdraw(ctx, rkey, c.id)
}
