package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// NewLocker adapts a *lock.Client to service.Locker, translating "Redis
// is unreachable" into service.ErrLockUnavailable. The service's key
// ("sku:7") becomes the hash tag of the Redis keys ("<prefix>{sku:7}" and
// its fence counter), so on a Cluster the lock, its fence and the SKU's
// sold-out mark share one slot, and different SKUs spread across slots.
func NewLocker(c *lock.Client) service.Locker { return locker{c} }

type locker struct{ c *lock.Client }

// hashTag wraps key in braces: Redis Cluster hashes only what is inside.
func hashTag(key string) string { return "{" + key + "}" }

func (l locker) Obtain(ctx context.Context, key string) (service.Lease, error) {
	return leaseOf(l.c.Obtain(ctx, hashTag(key)))
}

// leaseOf passes a backend's Obtain answer to the service, translating
// "the backend is unreachable" into service.ErrLockUnavailable (the order
// path then sells on the database's guard alone) and "held by live
// holders" into service.ErrLockBusy (it waits its turn).
func leaseOf[L service.Lease](lk L, err error) (service.Lease, error) {
	switch {
	case errors.Is(err, lock.ErrUnavailable):
		return nil, fmt.Errorf("%w: %w", service.ErrLockUnavailable, err)
	case errors.Is(err, lock.ErrContended):
		return nil, fmt.Errorf("%w: %w", service.ErrLockBusy, err)
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
// holding "incarnation:mark" (the SKU's created_at in µs, then its signed
// version mark), with an expiry so that a mark nobody clears still goes
// away. A mark of another incarnation reads as no mark: a database
// recreated with the same ids is never blocked by an old mark.
type soldOutMarks struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// setMark writes ARGV[1]:ARGV[2] unless the stored mark is of the same
// incarnation and a newer version.
var setMark = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local inc, m = string.match(cur, '^(%-?%d+):(%-?%d+)$')
  if inc == ARGV[1] and math.abs(tonumber(m)) > math.abs(tonumber(ARGV[2])) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[3])
return 1
`)

// key is "<prefix>{sku:7}": the hash tag of the SKU's lock (see NewLocker).
func (m soldOutMarks) key(id int64) string {
	return m.prefix + hashTag("sku:"+strconv.FormatInt(id, 10))
}

func (m soldOutMarks) Mark(ctx context.Context, sku service.SKURef) (int64, error) {
	v, err := m.rdb.Get(ctx, m.key(sku.ID)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	inc, mark, ok := strings.Cut(v, ":")
	if !ok || inc != strconv.FormatInt(sku.Incarnation, 10) {
		return 0, nil // another SKU's, or an older format
	}
	return strconv.ParseInt(mark, 10, 64)
}

func (m soldOutMarks) SetMark(ctx context.Context, sku service.SKURef, mark int64) error {
	return setMark.Run(ctx, m.rdb, []string{m.key(sku.ID)}, sku.Incarnation, mark, m.ttl.Milliseconds()).Err()
}

// readiness implements handler.Readiness and handler.TopologyReporter.
type readiness struct {
	store   service.Store
	redises []redis.UniversalClient
	mode    string
	watch   *sentinelWatch // nil unless redis.mode is sentinel
}

// RedisTopology names the mode and, with Sentinel, the current master and
// the master changes seen.
func (r readiness) RedisTopology(ctx context.Context) handler.Topology {
	t := handler.Topology{Mode: r.mode}
	if r.watch != nil {
		t.Master, t.Failovers, _ = r.watch.Master(ctx) // no answer: no master named
	}
	return t
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

// RedisLogger sends go-redis's own messages (a failed dial, a pool
// problem) to log instead of plain stderr. go-redis keeps one logger per
// process: main sets it with redis.SetLogger, once.
func RedisLogger(log *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	return redisLogger{log}
}

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
