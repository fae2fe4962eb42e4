package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/internal/conformance"
	"github.com/seckill/seckill/lock/locktest"
)

// TestConformance runs the lock contract (lock/internal/conformance)
// against every Redis backend on real servers; lock/zookeeper runs it
// against ZooKeeper.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(t *testing.T) conformance.Backend
	}{
		{"standalone", standaloneBackend},
		{"sentinel", sentinelBackend},
		{"cluster", clusterBackend},
		{"redlock", redlockBackend},
	} {
		t.Run(c.name, func(t *testing.T) { conformance.Run(t, c.start(t)) })
	}
}

// redisLocker adapts a *lock.Client to the suite.
type redisLocker struct{ *lock.Client }

func (c redisLocker) Obtain(ctx context.Context, key string) (conformance.Held, error) {
	l, err := c.Client.Obtain(ctx, key)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (c redisLocker) List(ctx context.Context) ([]string, error) { return c.HeldKeys(ctx, "*", 1000) }

// redisBackend is a backend of one Redis (standalone, Sentinel or
// Cluster), each client made by newRDB.
func redisBackend(t *testing.T, prefix string, newRDB func() redis.UniversalClient) conformance.Backend {
	admin := newRDB()
	t.Cleanup(func() { admin.Close() })
	return conformance.Backend{
		Client: func(t *testing.T, owner string, ttl time.Duration, watchdog bool) conformance.Locker {
			rdb := newRDB()
			c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithOwner(owner), lock.WithTTL(ttl),
				lock.WithWatchdog(watchdog), lock.WithWantedNotices(true))
			t.Cleanup(func() { c.Close(); rdb.Close() })
			return redisLocker{c}
		},
		Drop: func(t *testing.T, key string) {
			if err := admin.Del(context.Background(), prefix+key).Err(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func standaloneBackend(t *testing.T) conformance.Backend {
	_, prefix := sharedRedis(t) // its keys deleted when the test ends
	return redisBackend(t, prefix, func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: redisAddr}) })
}

func sentinelBackend(t *testing.T) conformance.Backend {
	g := locktest.StartSentinelGroupT(t, locktest.SentinelOptions{Replicas: 1})
	return redisBackend(t, "lock:", func() redis.UniversalClient {
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.Name, SentinelAddrs: g.SentinelAddrs()})
	})
}

func clusterBackend(t *testing.T) conformance.Backend {
	cl := locktest.StartClusterT(t, 3, 0)
	return redisBackend(t, "lock:", func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()}) })
}

func redlockBackend(t *testing.T) conformance.Backend {
	srvs := startCluster(t, 3)
	prefix := locktest.Name("conformance") + ":"
	admin := clientsOf(srvs)
	const why = "go-redsync "
	return conformance.Backend{
		Client: func(t *testing.T, owner string, ttl time.Duration, watchdog bool) conformance.Locker {
			return redisLocker{lock.NewRedlock(clientsOf(srvs), lock.WithPrefix(prefix), lock.WithOwner(owner),
				lock.WithTTL(ttl), lock.WithWatchdog(watchdog))}
		},
		Drop: func(t *testing.T, key string) {
			for _, rdb := range admin {
				if err := rdb.Del(context.Background(), prefix+key).Err(); err != nil {
					t.Fatal(err)
				}
			}
		},
		NoFence:   "no fence: independent masters cannot issue one increasing sequence (Fence() is 0)",
		NoNotices: "no wanted notices: " + why + "obtains publish nothing and leave no mark",
	}
}
