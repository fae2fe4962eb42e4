package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// NewRedlock returns a Client that holds each lease on a majority of
// independent Redis masters (Redlock, via go-redsync), without fences.
// Obtain returns ErrUnavailable when too few nodes answer for a quorum.
//
// Redlock assumes bounded clock drift, pauses shorter than the lease, and
// nodes that keep leases across restarts (docs/locking.md).
func NewRedlock(rdbs []redis.UniversalClient, opts ...Option) *Client {
	pools := make([]redsyncredis.Pool, len(rdbs))
	for i, rdb := range rdbs {
		pools[i] = goredis.NewPool(rdb)
	}
	o := newOptions(opts)
	o.notices = false // redsync's obtain publishes nothing
	return newClient(&redlock{
		rdbs:   rdbs,
		rs:     redsync.New(pools...),
		nodes:  len(rdbs),
		quorum: len(rdbs)/2 + 1,
	}, o)
}

// redlock is the backend over independent masters.
type redlock struct {
	rdbs   []redis.UniversalClient // for inspect
	rs     *redsync.Redsync
	nodes  int
	quorum int
}

func (r *redlock) mutex(key, token string, ttl time.Duration) *redsync.Mutex {
	return r.rs.NewMutex(key,
		redsync.WithExpiry(ttl),
		redsync.WithTries(1),
		redsync.WithValue(token),
		redsync.WithGenValueFunc(func() (string, error) { return token, nil }),
	)
}

// obtain ignores ranks: redsync keeps no contenders.
func (r *redlock) obtain(ctx context.Context, key, token string, ttl time.Duration, _ *contender) (fence, others int64, err error) {
	err = r.mutex(key, token, ttl).TryLockContext(ctx)
	if err == nil {
		return 0, noRank, nil
	}
	if r.noQuorum(err) {
		return 0, noRank, fmt.Errorf("%w: redlock: obtain: %w", ErrUnavailable, err)
	}
	return 0, noRank, errTaken
}

func (r *redlock) withdraw(context.Context, string, string) error { return nil }

// release never reports the key wanted: redsync does not say.
func (r *redlock) release(ctx context.Context, key, token string) (wanted bool, err error) {
	ok, err := r.mutex(key, token, time.Second).UnlockContext(ctx)
	return false, r.heldOrNot("release", ok, err)
}

// keep releases: redsync does not say whether the key is wanted.
func (r *redlock) keep(ctx context.Context, key, token string, _ time.Duration) (kept, wanted bool, err error) {
	_, err = r.release(ctx, key, token)
	return false, false, err
}

// refresh never reports the key wanted: redsync does not say.
func (r *redlock) refresh(ctx context.Context, key, token string, ttl time.Duration) (wanted bool, err error) {
	ok, err := r.mutex(key, token, ttl).ExtendContext(ctx)
	return false, r.heldOrNot("refresh", ok, err)
}

// heldOrNot is the error of an operation (op) on a held lease that a
// quorum answered ok, or not: ErrUnavailable when no quorum could be
// reached, else ErrNotHeld.
func (r *redlock) heldOrNot(op string, ok bool, err error) error {
	switch {
	case ok:
		return nil
	case r.noQuorum(err):
		return fmt.Errorf("%w: redlock: %s: %w", ErrUnavailable, op, err)
	default:
		return ErrNotHeld
	}
}

// listen is not possible: redsync's obtain publishes nothing.
func (r *redlock) listen(func(string, int64), func(string)) (stop func() error) { return nil }

// noQuorum reports whether so many nodes were unreachable that a quorum was
// impossible, whatever the others answered.
func (r *redlock) noQuorum(err error) bool {
	return countUnreachable(err) > r.nodes-r.quorum
}

// countUnreachable counts the nodes whose error in a (joined) redsync error
// says they could not be reached.
func countUnreachable(err error) int {
	if err == nil {
		return 0
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		n := 0
		for _, e := range joined.Unwrap() {
			n += countUnreachable(e)
		}
		return n
	}
	var node *redsync.RedisError
	if errors.As(err, &node) && unreachable(node.Err) {
		return 1
	}
	return 0
}
