package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// NewLocker adapts a *lock.Client to service.Locker, translating "Redis
// is unreachable" into service.ErrLockUnavailable.
func NewLocker(c *lock.Client) service.Locker { return locker{c} }

type locker struct{ c *lock.Client }

func (l locker) Obtain(ctx context.Context, key string) (service.Lease, error) {
	lk, err := l.c.Obtain(ctx, key)
	if errors.Is(err, lock.ErrUnavailable) {
		return nil, fmt.Errorf("%w: %w", service.ErrLockUnavailable, err)
	}
	if err != nil {
		return nil, err
	}
	return lk, nil
}

// NewSoldOutMarks returns the shared sold-out marks kept in rdb under
// prefix, each expiring after ttl.
func NewSoldOutMarks(rdb redis.UniversalClient, prefix string, ttl time.Duration) service.SoldOutMarks {
	return soldOutMarks{rdb: rdb, prefix: prefix, ttl: ttl}
}

// soldOutMarks keeps the shared sold-out marks in Redis, one key per SKU
// with an expiry, so a mark that a failed restock could not clear still
// goes away on its own.
type soldOutMarks struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

var _ service.SoldOutMarks = soldOutMarks{}

func (m soldOutMarks) key(id int64) string { return m.prefix + strconv.FormatInt(id, 10) }

func (m soldOutMarks) SoldOut(ctx context.Context, id int64) (bool, error) {
	n, err := m.rdb.Exists(ctx, m.key(id)).Result()
	return n == 1, err
}

func (m soldOutMarks) MarkSoldOut(ctx context.Context, id int64) error {
	return m.rdb.Set(ctx, m.key(id), 1, m.ttl).Err()
}

func (m soldOutMarks) ClearSoldOut(ctx context.Context, id int64) error {
	return m.rdb.Del(ctx, m.key(id)).Err()
}

// readiness implements handler.Readiness.
type readiness struct {
	store   service.Store
	redises []redis.UniversalClient
}

func (r readiness) MySQL(ctx context.Context) error { return r.store.Ping(ctx) }

// Redis reports nil when a majority of the Redis nodes answer PING.
func (r readiness) Redis(ctx context.Context) error {
	up := 0
	for _, c := range r.redises {
		if c.Ping(ctx).Err() == nil {
			up++
		}
	}
	if up < len(r.redises)/2+1 {
		return fmt.Errorf("redis: %d of %d nodes answer", up, len(r.redises))
	}
	return nil
}
