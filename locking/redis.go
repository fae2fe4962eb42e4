package locking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

var (
	_ engine.Locker         = (*RedisLocker)(nil)
	_ service.Elector       = (*RedisLocker)(nil)
	_ service.LockInspector = (*RedisLocker)(nil)
	_ engine.PlaceBoard     = (*RedisMarks)(nil)
)

// RedisLocker is the service's lock on Redis: a *lock.Client as
// engine.Locker and service.Elector. The service's key ("sku:7") becomes
// the hash tag of the Redis keys ("<prefix>{sku:7}" and its fence
// counter), so on a Cluster the lock, its fence and the SKU's sold-out
// mark share one slot, and different SKUs spread across slots.
type RedisLocker struct{ c *lock.Client }

// NewRedisLocker returns the service's lock over c.
func NewRedisLocker(c *lock.Client) *RedisLocker { return &RedisLocker{c} }

// hashTag wraps key in braces: Redis Cluster hashes only what is inside.
func hashTag(key string) string { return "{" + key + "}" }

// Obtain takes the lock of key, in order of rank unless it is 0
// (lock.Client.ObtainRanked): the order path's fair selling.
func (l *RedisLocker) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	var (
		lk  *lock.Lock
		err error
	)
	if rank != 0 {
		lk, err = l.c.ObtainRanked(ctx, hashTag(key), rank)
	} else {
		lk, err = l.c.Obtain(ctx, hashTag(key))
	}
	return asLease(redisLease{lk}, err)
}

// Ranks reports true: a free Redis lock goes to the lowest rank waiting.
func (l *RedisLocker) Ranks() bool { return true }

// Elect takes the lock of key unranked: the sweeper's election.
func (l *RedisLocker) Elect(ctx context.Context, key string) (service.Leadership, error) {
	lk, err := l.c.Obtain(ctx, hashTag(key))
	return asLeadership(lk, err)
}

// redisLease is a Redis lock as an engine.Lease: it hears who wants it and
// their ranks, and keeps itself in one round trip (in Redlock mode Keep
// lets it go and Wanting is nil). It says no fence horizon: Redis fences
// are microsecond-seeded, and the database never holds one above what
// this backend may have issued.
type redisLease struct{ *lock.Lock }

var _ engine.Handoff = redisLease{}

// InspectLock reads the state of key's lock without taking it.
func (l *RedisLocker) InspectLock(ctx context.Context, key string) (service.LockState, error) {
	return asState(l.c.Inspect(ctx, hashTag(key)))
}

// HeldKeys returns up to limit service keys matching the glob match
// ("sku:*") whose lock has a holder now; see lock.Client.HeldKeys.
func (l *RedisLocker) HeldKeys(ctx context.Context, match string, limit int) ([]string, error) {
	tagged, err := l.c.HeldKeys(ctx, hashTag(match), limit)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(tagged))
	for _, k := range tagged {
		keys = append(keys, strings.Trim(k, "{}"))
	}
	return keys, nil
}

var _ service.SoldOutMarks = (*RedisMarks)(nil)

// RedisMarks keeps the shared sold-out marks in Redis, one key per SKU
// holding "incarnation:mark" (the SKU's created_at in µs, then its signed
// version mark), with an expiry so that a mark nobody clears still goes
// away. A mark of another incarnation reads as no mark: a database
// recreated with the same ids is never blocked by an old mark.
type RedisMarks struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewRedisMarks returns the shared sold-out marks kept in rdb under
// prefix, each expiring after ttl.
func NewRedisMarks(rdb redis.UniversalClient, prefix string, ttl time.Duration) *RedisMarks {
	return &RedisMarks{rdb: rdb, prefix: prefix, ttl: ttl}
}

// setRedisMark writes ARGV[1]:ARGV[2] unless the stored mark is of the same
// incarnation and a newer version.
var setRedisMark = redis.NewScript(`
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

// key is "<prefix>{sku:7}": the hash tag of the SKU's lock (see RedisLocker).
func (m *RedisMarks) key(id int64) string {
	return m.prefix + hashTag(service.SKULockKey(id))
}

// Mark returns the stored mark of sku's incarnation, 0 when there is none.
func (m *RedisMarks) Mark(ctx context.Context, sku service.SKURef) (int64, error) {
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

// SetMark writes mark unless the stored one is of the same incarnation
// and a newer version, in one script.
func (m *RedisMarks) SetMark(ctx context.Context, sku service.SKURef, mark int64) error {
	return setRedisMark.Run(ctx, m.rdb, []string{m.key(sku.ID)}, sku.Incarnation, mark, m.ttl.Milliseconds()).Err()
}

// placesChannel, after the marks' prefix, is where instances post the
// places of buyers told to come back (engine.PlaceBoard).
const placesChannel = "places"

// Post publishes ps to every instance listening, in one message.
func (m *RedisMarks) Post(ctx context.Context, ps []engine.Place) error {
	msg, err := json.Marshal(ps)
	if err != nil {
		return err
	}
	return m.rdb.Publish(ctx, m.prefix+placesChannel, msg).Err()
}

// Listen subscribes to the places posted, calling learn with each
// message's, until stop; a message it cannot read is skipped. go-redis
// subscribes again after a reconnect: places posted meanwhile are missed,
// which costs their buyers their place, nothing else.
func (m *RedisMarks) Listen(learn func([]engine.Place)) (stop func()) {
	return subscribe(m.rdb, m.prefix+placesChannel, learn)
}

// subscribe calls learn with each message of channel read as JSON into a
// T, until stop; a message it cannot read is skipped.
func subscribe[T any](rdb redis.UniversalClient, channel string, learn func(T)) (stop func()) {
	ps := rdb.Subscribe(context.Background(), channel)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range ps.Channel() {
			var v T
			if json.Unmarshal([]byte(msg.Payload), &v) == nil {
				learn(v)
			}
		}
	}()
	return func() {
		_ = ps.Close()
		<-done
	}
}

// PingRedis reports nil when a majority of the Redis nodes answer PING:
// with Redlock, the lock works while a majority of its masters does.
func PingRedis(ctx context.Context, nodes []redis.UniversalClient) error {
	up := 0
	for _, c := range nodes {
		if c.Ping(ctx).Err() == nil {
			up++
		}
	}
	if up < len(nodes)/2+1 {
		return fmt.Errorf("redis: %d of %d nodes answer", up, len(nodes))
	}
	return nil
}

var _ service.OrderFeed = (*RedisFeed)(nil)

// RedisFeed carries the order changes of every instance of a deployment
// over one Redis pub/sub channel, "<prefix>orders" (service.OrderFeed):
// one subscription per instance, whatever the long-polls it holds.
type RedisFeed struct {
	rdb     redis.UniversalClient
	channel string
}

// NewRedisFeed returns the feed on rdb's channel prefix + "orders".
func NewRedisFeed(rdb redis.UniversalClient, prefix string) *RedisFeed {
	return &RedisFeed{rdb: rdb, channel: prefix + "orders"}
}

// orderChange is a service.OrderChange on the wire.
type orderChange struct {
	IDs  []int64 `json:"ids"`
	At   int64   `json:"at"` // unix µs, the committing instance's clock
	From string  `json:"from"`
}

// Publish sends c in one message.
func (f *RedisFeed) Publish(ctx context.Context, c service.OrderChange) error {
	msg, err := json.Marshal(orderChange{IDs: c.IDs, At: c.At.UnixMicro(), From: c.From})
	if err != nil {
		return err
	}
	return f.rdb.Publish(ctx, f.channel, msg).Err()
}

// Subscribe calls heard with each change published, until stop; a
// message it cannot read is skipped. go-redis subscribes again after a
// reconnect: what was published meanwhile is missed, and heard by the
// long-polls' recheck.
func (f *RedisFeed) Subscribe(heard func(service.OrderChange)) (stop func()) {
	return subscribe(f.rdb, f.channel, func(c orderChange) {
		heard(service.OrderChange{IDs: c.IDs, At: time.UnixMicro(c.At), From: c.From})
	})
}
