package lock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed obtain.lua
	obtainLua    string
	obtainScript = redis.NewScript(obtainLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed keep.lua
	keepLua    string
	keepScript = redis.NewScript(keepLua)

	//go:embed refresh.lua
	refreshLua    string
	refreshScript = redis.NewScript(refreshLua)
)

// fenceSuffix names the per-key fence counter: prefix+key+fenceSuffix, and
// wantedSuffix the mark a refused Obtain leaves for the holder's release.
const (
	fenceSuffix  = ":fence"
	wantedSuffix = ":wanted"
)

// noticeChannel, after the Client's prefix, is the channel a refused obtain
// publishes the lock's key on (WithWantedNotices).
const noticeChannel = "wanted"

// single is the backend for one Redis (standalone, Sentinel or Cluster):
// SET NX PX and the fence counter in one script, one round trip per call;
// with minReplicas, the script and WAIT share a pipeline.
type single struct {
	rdb         redis.UniversalClient
	fenceTTL    time.Duration
	wantedTTL   time.Duration // lifetime of the mark a refused obtain leaves
	minReplicas int
	replicaTO   time.Duration
	notices     string        // channel a refused obtain publishes the key on; "" for none
	listenTO    time.Duration // longest wait for the subscription to notices
}

func (s *single) obtain(ctx context.Context, key, token string, ttl time.Duration) (int64, error) {
	if s.minReplicas > 0 {
		return s.obtainReplicated(ctx, key, token, ttl)
	}
	fence, err := obtainScript.Run(ctx, s.rdb, s.obtainKeys(key), s.obtainArgs(token, ttl)...).Int64()
	return fenceOrTaken(fence, err)
}

func (s *single) obtainKeys(key string) []string {
	return []string{key, key + fenceSuffix, key + wantedSuffix}
}

func (s *single) obtainArgs(token string, ttl time.Duration) []any {
	return []any{token, ttl.Milliseconds(), s.fenceTTL.Milliseconds(), max(s.wantedTTL, time.Millisecond).Milliseconds(), s.notices}
}

func fenceOrTaken(fence int64, err error) (int64, error) {
	if err != nil {
		return 0, redisErr("obtain", err)
	}
	if fence <= 0 { // -1 - the holder's remaining TTL in ms (obtain.lua)
		return 0, &takenError{ttl: time.Duration(-1-fence) * time.Millisecond}
	}
	return fence, nil
}

// obtainReplicated pipelines the obtain script and WAIT on the key's master:
// WAIT counts acknowledgements of its own connection's writes, so only one
// connection makes it cover the script's SET and INCR.
func (s *single) obtainReplicated(ctx context.Context, key, token string, ttl time.Duration) (int64, error) {
	node, err := s.master(ctx, key)
	if err != nil {
		return 0, err
	}
	run := func() (*redis.Cmd, *redis.Cmd) {
		pipe := node.Pipeline()
		obtained := obtainScript.EvalSha(ctx, pipe, s.obtainKeys(key), s.obtainArgs(token, ttl)...)
		// WAIT's reply arrives within replicaTO, inside the client's read
		// timeout as long as replicaTO is shorter (config checks it).
		acked := pipe.Do(ctx, "wait", s.minReplicas, s.replicaTO.Milliseconds())
		_, _ = pipe.Exec(ctx) // each command carries its own error
		return obtained, acked
	}
	obtained, acked := run()
	if redis.HasErrorPrefix(obtained.Err(), "NOSCRIPT") {
		if err := obtainScript.Load(ctx, node).Err(); err != nil {
			return 0, redisErr("obtain", err)
		}
		obtained, acked = run()
	}
	fence, err := fenceOrTaken(obtained.Int64())
	if err != nil {
		return 0, err
	}
	n, err := acked.Int64()
	if err != nil {
		return 0, fmt.Errorf("%w: redis: %w: wait: %w", ErrUnavailable, ErrNotReplicated, err)
	}
	if n < int64(s.minReplicas) {
		return 0, fmt.Errorf("%w: redis: %w: %d of %d replicas within %v", ErrUnavailable, ErrNotReplicated, n, s.minReplicas, s.replicaTO)
	}
	return fence, nil
}

// master returns the client of the node that serves key: the Cluster
// master of its slot, or the one Redis (a Sentinel client follows the
// current master on its own).
func (s *single) master(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, redisErr("obtain", err)
		}
		return node, nil
	case *redis.Client:
		return c, nil
	default:
		return nil, fmt.Errorf("lock: WithMinReplicas needs a *redis.Client or *redis.ClusterClient, not %T", s.rdb)
	}
}

func (s *single) release(ctx context.Context, key, token string) (wanted bool, err error) {
	n, err := releaseScript.Run(ctx, s.rdb, []string{key, key + wantedSuffix}, token).Int64()
	if err != nil {
		return false, redisErr("release", err)
	}
	if n == 0 {
		return false, ErrNotHeld
	}
	return n == 2, nil
}

func (s *single) keep(ctx context.Context, key, token string, ttl time.Duration) (kept, wanted bool, err error) {
	n, err := keepScript.Run(ctx, s.rdb, []string{key, key + wantedSuffix}, token, ttl.Milliseconds()).Int64()
	if err != nil {
		return false, false, redisErr("keep", err)
	}
	if n == 0 {
		return false, false, ErrNotHeld
	}
	return n == 1, n == 2, nil
}

func (s *single) refresh(ctx context.Context, key, token string, ttl time.Duration) (wanted bool, err error) {
	n, err := refreshScript.Run(ctx, s.rdb, []string{key, key + wantedSuffix}, token, ttl.Milliseconds()).Int64()
	if err != nil {
		return false, redisErr("refresh", err)
	}
	if n == 0 {
		return false, ErrNotHeld
	}
	return n == 2, nil
}

// listen subscribes to the channel refused obtains publish on, calling
// wanted with each key; the returned function ends the subscription.
func (s *single) listen(wanted func(key string)) (stop func() error) {
	ps := s.rdb.Subscribe(context.Background(), s.notices)
	// Wait briefly for the subscription, so that a key refused after the first
	// Obtain returned is heard; go-redis subscribes later if Redis is silent.
	ctx, cancel := context.WithTimeout(context.Background(), s.listenTO)
	_, _ = ps.Receive(ctx)
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range ps.Channel() { // go-redis resubscribes after a reconnect
			wanted(msg.Payload)
		}
	}()
	return func() error {
		err := ps.Close()
		<-done
		return err
	}
}

// redisErr wraps a go-redis error, marking it ErrUnavailable when it says
// Redis could not be reached or cannot serve right now.
func redisErr(op string, err error) error {
	if unreachable(err) {
		return fmt.Errorf("%w: redis: %s: %w", ErrUnavailable, op, err)
	}
	return fmt.Errorf("lock: %s: %w", op, err)
}

// unreachable reports whether err means the server is unreachable, not
// ready, or refuses these credentials (no retry fixes that), rather than a
// reply error such as a script bug. Callers check their own ctx first: a
// context error here is the client's dial or I/O timeout.
func unreachable(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true // network, timeout, pool exhausted, client closed
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) ||
		redis.IsMasterDownError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMaxClientsError(err) ||
		redis.IsAuthError(err) || redis.IsPermissionError(err)
}
