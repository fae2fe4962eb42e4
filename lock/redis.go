package lock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

	//go:embed inspect.lua
	inspectLua    string
	inspectScript = redis.NewScript(inspectLua)
)

// fenceSuffix names the per-key fence counter: prefix+key+fenceSuffix, and
// wantedSuffix the mark a refused Obtain leaves for the holder's release.
const (
	fenceSuffix  = ":fence"
	wantedSuffix = ":wanted"
	// rankSuffix names the ranked contenders of a key (a sorted set by
	// rank) and rankExpSuffix when each one's rank stops counting.
	rankSuffix    = ":ranks"
	rankExpSuffix = ":ranks-exp"
)

// noticeChannel, after the Client's prefix, is the channel a refused obtain
// publishes the lock's key on (WithWantedNotices), and freedChannel the one
// a release of a wanted key publishes it on.
const (
	noticeChannel = "wanted"
	freedChannel  = "freed"
)

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
	freed       string        // channel a release of a wanted key publishes it on; "" for none
	listenTO    time.Duration // longest wait for the subscription to notices
}

func (s *single) obtain(ctx context.Context, key, token string, ttl time.Duration, who *contender) (fence, others int64, err error) {
	if s.minReplicas > 0 {
		return s.obtainReplicated(ctx, key, token, ttl, who)
	}
	return fenceOrTaken(obtainScript.Run(ctx, s.rdb, s.obtainKeys(key, who), s.obtainArgs(token, ttl, who)...), who)
}

func (s *single) obtainKeys(key string, who *contender) []string {
	if who != nil {
		return []string{key, key + fenceSuffix, key + wantedSuffix, key + rankSuffix, key + rankExpSuffix}
	}
	return []string{key, key + fenceSuffix, key + wantedSuffix}
}

func (s *single) obtainArgs(token string, ttl time.Duration, who *contender) []any {
	args := []any{token, ttl.Milliseconds(), s.fenceTTL.Milliseconds(), max(s.wantedTTL, time.Millisecond).Milliseconds(), s.notices}
	if who != nil {
		args = append(args, who.id, who.rank, max(who.ttl, time.Millisecond).Milliseconds())
	}
	return args
}

// fenceOrTaken reads obtain.lua's answer: the fence, or errTaken; with a
// contender, also the lowest rank of the others (noRank when none).
func fenceOrTaken(cmd *redis.Cmd, who *contender) (fence, others int64, err error) {
	others = noRank
	if who == nil {
		fence, err = cmd.Int64()
	} else {
		var reply []any
		if reply, err = cmd.Slice(); err == nil {
			fence, others, err = rankedReply(reply)
		}
	}
	if err != nil {
		return 0, noRank, redisErr("obtain", err)
	}
	if fence <= 0 { // -1 - the holder's remaining TTL in ms (obtain.lua)
		return 0, others, &takenError{ttl: time.Duration(-1-fence) * time.Millisecond}
	}
	return fence, others, nil
}

// rankedReply reads {fence, lowest other rank or nil}.
func rankedReply(reply []any) (fence, others int64, err error) {
	others = noRank
	if len(reply) == 0 {
		return 0, noRank, fmt.Errorf("lock: obtain: empty reply")
	}
	fence, ok := reply[0].(int64)
	if !ok {
		return 0, noRank, fmt.Errorf("lock: obtain: reply %v", reply)
	}
	if len(reply) > 1 {
		if r, ok := reply[1].(string); ok {
			if others, err = strconv.ParseInt(r, 10, 64); err != nil {
				return 0, noRank, fmt.Errorf("lock: obtain: rank %q: %w", r, err)
			}
		}
	}
	return fence, others, nil
}

// withdraw takes a contender's rank back, so that it no longer holds up
// the others.
func (s *single) withdraw(ctx context.Context, key, id string) error {
	pipe := s.rdb.TxPipeline()
	pipe.ZRem(ctx, key+rankSuffix, id)
	pipe.ZRem(ctx, key+rankExpSuffix, id)
	if _, err := pipe.Exec(ctx); err != nil {
		return redisErr("withdraw", err)
	}
	return nil
}

// obtainReplicated pipelines the obtain script and WAIT on the key's master:
// WAIT counts acknowledgements of its own connection's writes, so only one
// connection makes it cover the script's SET and INCR.
func (s *single) obtainReplicated(ctx context.Context, key, token string, ttl time.Duration, who *contender) (fence, others int64, err error) {
	node, err := s.master(ctx, key)
	if err != nil {
		return 0, noRank, err
	}
	run := func() (*redis.Cmd, *redis.Cmd) {
		pipe := node.Pipeline()
		obtained := obtainScript.EvalSha(ctx, pipe, s.obtainKeys(key, who), s.obtainArgs(token, ttl, who)...)
		// WAIT's reply arrives within replicaTO, inside the client's read
		// timeout as long as replicaTO is shorter (config checks it).
		acked := pipe.Do(ctx, "wait", s.minReplicas, s.replicaTO.Milliseconds())
		_, _ = pipe.Exec(ctx) // each command carries its own error
		return obtained, acked
	}
	obtained, acked := run()
	if redis.HasErrorPrefix(obtained.Err(), "NOSCRIPT") {
		if err := obtainScript.Load(ctx, node).Err(); err != nil {
			return 0, noRank, redisErr("obtain", err)
		}
		obtained, acked = run()
	}
	fence, others, err = fenceOrTaken(obtained, who)
	if err != nil {
		return 0, others, err
	}
	n, err := acked.Int64()
	if err != nil {
		return 0, noRank, fmt.Errorf("%w: redis: %w: wait: %w", ErrUnavailable, ErrNotReplicated, err)
	}
	if n < int64(s.minReplicas) {
		return 0, noRank, fmt.Errorf("%w: redis: %w: %d of %d replicas within %v", ErrUnavailable, ErrNotReplicated, n, s.minReplicas, s.replicaTO)
	}
	return fence, others, nil
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
	n, err := releaseScript.Run(ctx, s.rdb, []string{key, key + wantedSuffix}, token, s.freed).Int64()
	if err != nil {
		return false, redisErr("release", err)
	}
	if n == 0 {
		return false, ErrNotHeld
	}
	return n == 2, nil
}

func (s *single) keep(ctx context.Context, key, token string, ttl time.Duration) (kept, wanted bool, err error) {
	n, err := keepScript.Run(ctx, s.rdb, []string{key, key + wantedSuffix}, token, ttl.Milliseconds(), s.freed).Int64()
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

// listen subscribes to the channels refused obtains and releases of
// wanted keys publish on, calling wanted with each key a refusal names
// (and the refused contender's rank, noRank for none) and freed with each
// released key; the returned function ends the subscription.
func (s *single) listen(wanted func(key string, rank int64), freed func(key string)) (stop func() error) {
	ps := s.rdb.Subscribe(context.Background(), s.notices, s.freed)
	// Wait briefly for the subscription, so that a key refused after the first
	// Obtain returned is heard; go-redis subscribes later if Redis is silent.
	ctx, cancel := context.WithTimeout(context.Background(), s.listenTO)
	_, _ = ps.Receive(ctx)
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range ps.Channel() { // go-redis resubscribes after a reconnect
			if msg.Channel == s.freed {
				freed(msg.Payload)
				continue
			}
			wanted(wantedNotice(msg.Payload))
		}
	}()
	return func() error {
		err := ps.Close()
		<-done
		return err
	}
}

// wantedNotice splits a refusal's notice, "key" or "key NUL rank".
func wantedNotice(payload string) (key string, rank int64) {
	i := strings.LastIndexByte(payload, 0)
	if i < 0 {
		return payload, noRank
	}
	r, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil {
		return payload, noRank
	}
	return payload[:i], r
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
