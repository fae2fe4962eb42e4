package lock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// TokenPrefixLen is how many characters of a holder's random token State
// shows: enough to tell holders apart, far too few to act on their lease.
const TokenPrefixLen = 6

// State is a lock as its store knows it, read without taking or extending
// the lease.
type State struct {
	// Held reports whether someone holds the lease.
	Held bool
	// Owner is the holder's name (WithOwner), "" when it gave none.
	Owner string
	// Token is the first TokenPrefixLen characters of the holder's random
	// token, never the whole token.
	Token string
	// Fence is the holder's fence; when free, the last fence issued for the
	// key (0 for none, and always with Redlock).
	Fence int64
	// LeaseLeft is the lease's remaining time to live (0 when free; with
	// ZooKeeper, whose lease is the holder's session, also 0).
	LeaseLeft time.Duration
	// Since is when the lease was granted, by the store's clock; zero when
	// the store cannot tell (Redlock).
	Since time.Time
	// Renewed reports whether the holder set or extended its lease within
	// the last watchdog period (TTL/3 plus the attempt timeout), judged by this
	// Client's TTL. Always true with ZooKeeper, whose node lives as long as its
	// session.
	Renewed bool
	// Wanted reports that another client was refused the key lately (not
	// known with Redlock).
	Wanted bool
	// Waiters counts the goroutines of this Client queued for the key
	// behind the one that holds or competes for it.
	Waiters int
	// Queued counts the waiters of every client behind the holder: only
	// ZooKeeper, whose queue is in the store, knows it.
	Queued int
	// Nodes is the state on each master, in order, with Redlock; nil
	// otherwise. The lock is held when a majority agree on the holder.
	Nodes []State
}

// Inspect returns key's lock as the store knows it, in one round trip (per
// master, in parallel, with Redlock), never taking or extending a lease. It
// returns an error wrapping ErrUnavailable when the store or a quorum of
// masters cannot be reached.
func (c *Client) Inspect(ctx context.Context, key string) (State, error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.attemptTO)
	defer cancel()
	st, err := c.be.inspect(actx, c.opts.prefix+key, c.opts.ttl-c.opts.ttl/3-c.opts.attemptTO)
	if err != nil {
		return State{}, err
	}
	st.Waiters = c.queued(key)
	return st, nil
}

// queued returns the number of goroutines waiting locally for key.
func (c *Client) queued(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.slots[key]; s != nil {
		return len(s.waiters)
	}
	return 0
}

// ownerToken is the value of a lease: its owner's name (WithOwner), a
// colon, then the random token; the random token alone without an owner.
func ownerToken(owner string) string {
	if owner == "" {
		return randomToken()
	}
	return owner + ":" + randomToken()
}

// SplitToken returns the owner and the first TokenPrefixLen characters of
// the random part of a lease's value. Random tokens are base32, so the
// last colon ends the owner.
func SplitToken(v string) (owner, prefix string) {
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		owner, v = v[:i], v[i+1:]
	}
	return owner, v[:min(len(v), TokenPrefixLen)]
}

// sinceFence reads when a fence was issued: obtain.lua issues max(counter,
// server time in µs) + 1, the server's time unless fences came faster than
// one per µs. Zero for a fence that reads as no time between a year ago and
// a day ahead.
func sinceFence(fence int64) time.Time {
	t := time.UnixMicro(fence - 1)
	if d := time.Since(t); d < -24*time.Hour || d > 24*time.Hour*365 {
		return time.Time{}
	}
	return t
}

// readState turns inspect.lua's answer into a State; renewedAbove is the
// remaining time to live above which the lease was renewed lately.
func readState(vals []any, renewedAbove time.Duration) (State, error) {
	if len(vals) != 4 {
		return State{}, fmt.Errorf("lock: inspect: %d values; want 4", len(vals))
	}
	v, _ := vals[0].(string)
	pttl, _ := vals[1].(int64)
	fs, _ := vals[2].(string)
	wanted, _ := vals[3].(int64)
	fence, err := strconv.ParseInt(fs, 10, 64)
	if err != nil {
		return State{}, fmt.Errorf("lock: inspect: fence %q: %w", fs, err)
	}
	st := State{Fence: fence, Wanted: wanted == 1}
	if v == "" {
		return st, nil
	}
	st.Held = true
	st.Owner, st.Token = SplitToken(v)
	st.LeaseLeft = time.Duration(max(pttl, 0)) * time.Millisecond
	st.Renewed = st.LeaseLeft >= renewedAbove
	st.Since = sinceFence(fence)
	return st, nil
}

func (s *single) inspect(ctx context.Context, key string, renewedAbove time.Duration) (State, error) {
	vals, err := inspectScript.Run(ctx, s.rdb, []string{key, key + fenceSuffix, key + wantedSuffix}).Slice()
	if err != nil {
		return State{}, redisErr("inspect", err)
	}
	return readState(vals, renewedAbove)
}

// inspect reads each master with one pipeline (GET and PTTL of the lease),
// in parallel. Redlock keeps no fence and no wanted mark.
func (r *redlock) inspect(ctx context.Context, key string, renewedAbove time.Duration) (State, error) {
	type answer struct {
		st  State
		err error
	}
	answers := make([]answer, len(r.rdbs))
	done := make(chan struct{})
	for i, rdb := range r.rdbs {
		go func() {
			defer func() { done <- struct{}{} }()
			var get *redis.StringCmd
			var pttl *redis.DurationCmd
			_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				get, pttl = p.Get(ctx, key), p.PTTL(ctx, key)
				return nil
			})
			if err != nil && err != redis.Nil {
				answers[i].err = redisErr("inspect", err)
				return
			}
			if v := get.Val(); v != "" {
				st := State{Held: true, LeaseLeft: max(pttl.Val(), 0)}
				st.Owner, st.Token = SplitToken(v)
				st.Renewed = st.LeaseLeft >= renewedAbove
				answers[i].st = st
			}
		}()
	}
	for range r.rdbs {
		<-done
	}
	st := State{Nodes: make([]State, len(answers))}
	votes := map[string]int{}
	down := 0
	for i, a := range answers {
		st.Nodes[i] = a.st
		if a.err != nil {
			down++
			continue
		}
		if a.st.Held {
			votes[a.st.Owner+":"+a.st.Token]++
		}
	}
	if down > r.nodes-r.quorum {
		return State{}, fmt.Errorf("%w: redlock: inspect: %d of %d masters unreachable", ErrUnavailable, down, r.nodes)
	}
	for _, n := range st.Nodes {
		if n.Held && votes[n.Owner+":"+n.Token] >= r.quorum {
			st.Held, st.Owner, st.Token, st.Renewed = true, n.Owner, n.Token, n.Renewed
			st.LeaseLeft = max(st.LeaseLeft, n.LeaseLeft)
			break
		}
	}
	return st, nil
}
