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

	//go:embed refresh.lua
	refreshLua    string
	refreshScript = redis.NewScript(refreshLua)
)

// fenceSuffix names the per-key fence counter: prefix+key+fenceSuffix.
const fenceSuffix = ":fence"

// single is the backend for one Redis: atomic SET NX PX plus a fence counter
// in the same script. Each call is one round trip (EVALSHA) once Redis has
// cached the script.
type single struct {
	rdb      redis.UniversalClient
	fenceTTL time.Duration
}

func (s *single) obtain(ctx context.Context, key, token string, ttl time.Duration) (int64, error) {
	fence, err := obtainScript.Run(ctx, s.rdb, []string{key, key + fenceSuffix},
		token, ttl.Milliseconds(), s.fenceTTL.Milliseconds()).Int64()
	if err != nil {
		return 0, redisErr("obtain", err)
	}
	if fence == 0 {
		return 0, errTaken
	}
	return fence, nil
}

func (s *single) release(ctx context.Context, key, token string) error {
	n, err := releaseScript.Run(ctx, s.rdb, []string{key}, token).Int64()
	if err != nil {
		return redisErr("release", err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}

func (s *single) refresh(ctx context.Context, key, token string, ttl time.Duration) error {
	n, err := refreshScript.Run(ctx, s.rdb, []string{key}, token, ttl.Milliseconds()).Int64()
	if err != nil {
		return redisErr("refresh", err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}

// redisErr wraps a go-redis error, marking it ErrUnavailable when it says
// Redis could not be reached or cannot serve right now.
func redisErr(op string, err error) error {
	if unreachable(err) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	}
	return fmt.Errorf("lock: %s: %w", op, err)
}

// unreachable reports whether err means the server could not be reached or
// is not ready to serve (as opposed to a reply error such as a script bug).
// Callers check their own context first: a context error here is a dial or
// I/O timeout of the client.
func unreachable(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true // network, timeout, pool exhausted, client closed
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) ||
		redis.IsMasterDownError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMaxClientsError(err)
}
