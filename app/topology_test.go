package app

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// openTestRedis opens the Redis setup a service configured with cfg would.
func openTestRedis(t *testing.T, cfg config.Config) *redisSetup {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rs, err := newRedisSetup(cfg, cfg.Redis.Addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}

// TestCluster_LocksFencesAndMarksPerSKU: on a real 3-master Cluster (each
// with a replica), every SKU's lock, fence counter and sold-out mark live in
// one slot, the SKUs spread over all three masters, and obtain, fence,
// release, min_replicas and the marks all work.
func TestCluster_LocksFencesAndMarksPerSKU(t *testing.T) {
	cl := testenv.StartCluster(t, 3, 1)
	cfg := config.Default()
	cfg.Redis.Mode = config.RedisCluster
	cfg.Redis.Addrs = cl.Addrs()[:2] // seed nodes; the client learns the rest
	cfg.Lock.MinReplicas = 1
	// The 100ms default is for a healthy server; on a test machine shared
	// by many CPU-bound jobs a replica can be starved that long.
	cfg.Lock.ReplicaTimeout, cfg.Redis.IOTimeout = time.Second, 2*time.Second
	rs := openTestRedis(t, cfg)
	cc := rs.clients[0].(*redis.ClusterClient)
	ctx := context.Background()
	const prefix = "seckill:lock:"

	opts := append([]lock.Option{lock.WithPrefix(prefix), lock.WithRetry(time.Millisecond, time.Millisecond, 1)},
		lockReplicaOptions(cfg)...)
	a, b := locking.NewRedisLocker(rs.lockClient(opts...)), locking.NewRedisLocker(rs.lockClient(opts...))
	marks := locking.NewRedisMarks(rs.marks(), prefix+"soldout:", time.Minute)
	masters := map[string]bool{}
	for id := int64(1); id <= 100; id++ {
		key := "sku:" + strconv.FormatInt(id, 10)
		l1, err := a.Obtain(ctx, key, 0)
		if err != nil {
			t.Fatalf("sku %d: Obtain = %v", id, err)
		}
		if _, err := b.Obtain(ctx, key, 0); err == nil || errors.Is(err, service.ErrLockUnavailable) {
			t.Fatalf("sku %d: second client's Obtain while held = %v; want not obtained", id, err)
		}
		if err := marks.SetMark(ctx, service.SKURef{ID: id, Incarnation: 1}, 5); err != nil {
			t.Fatalf("sku %d: SetMark = %v", id, err)
		}
		if err := marks.SetMark(ctx, service.SKURef{ID: id, Incarnation: 1}, -3); err != nil { // older: must not replace
			t.Fatalf("sku %d: SetMark = %v", id, err)
		}
		if m, err := marks.Mark(ctx, service.SKURef{ID: id, Incarnation: 1}); err != nil || m != 5 {
			t.Fatalf("sku %d: Mark = %d, %v; want 5", id, m, err)
		}

		lockKey := prefix + "{" + key + "}"
		slots := map[int64]bool{}
		for _, k := range []string{lockKey, lockKey + ":fence", prefix + "soldout:{" + key + "}"} {
			if n := cc.Exists(ctx, k).Val(); n != 1 {
				t.Errorf("sku %d: key %s missing", id, k)
			}
			slots[cc.ClusterKeySlot(ctx, k).Val()] = true
		}
		if len(slots) != 1 {
			t.Errorf("sku %d: lock, fence and mark in slots %v; want one", id, slots)
		}
		node, err := cc.MasterForKey(ctx, lockKey)
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true

		if err := l1.Release(ctx); err != nil {
			t.Fatalf("sku %d: Release = %v", id, err)
		}
		l2, err := b.Obtain(ctx, key, 0)
		if err != nil {
			t.Fatalf("sku %d: Obtain after release = %v", id, err)
		}
		if l2.Fence() <= l1.Fence() {
			t.Errorf("sku %d: fences %d then %d; want increasing", id, l1.Fence(), l2.Fence())
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(masters) != 3 {
		t.Errorf("100 SKUs on %d masters; want spread over all 3", len(masters))
	}
}

// TestSentinel_FailoverLosesTheLockButNotTheData is the lock articles'
// scenario, reproduced with real processes: the master grants A a lease that
// never reaches the replica, dies, Sentinel promotes the replica, and B gets
// the same lease: two holders. The fences (max(counter, Redis µs clock)+1)
// still order them, so the database takes B's write and refuses A's. With
// lock.min_replicas 1 the same acquisition by A fails instead.
func TestSentinel_FailoverLosesTheLockButNotTheData(t *testing.T) {
	g := testenv.StartSentinelGroup(t, 1)
	cfg := config.Default()
	cfg.Redis.Mode = config.RedisSentinel
	cfg.Redis.Addrs = g.SentinelAddrs()
	cfg.Redis.MasterName = g.Name
	ctx := context.Background()
	const prefix = "seckill:lock:"
	lockOpts := []lock.Option{lock.WithPrefix(prefix), lock.WithTTL(time.Minute), lock.WithRetry(time.Millisecond, time.Millisecond, 1)}

	// Clients A (with and without min_replicas) and B are separate
	// processes' worth of clients, each with its own Sentinel client.
	replicated := cfg
	replicated.Lock.MinReplicas = 1
	replicated.Lock.ReplicaTimeout, replicated.Redis.IOTimeout = time.Second, 2*time.Second // see TestCluster_
	aSafe := locking.NewRedisLocker(openTestRedis(t, replicated).lockClient(append(lockOpts, lockReplicaOptions(replicated)...)...))
	rsA := openTestRedis(t, cfg)
	a := locking.NewRedisLocker(rsA.lockClient(lockOpts...))
	rsB := openTestRedis(t, cfg)
	b := locking.NewRedisLocker(rsB.lockClient(lock.WithPrefix(prefix), lock.WithTTL(time.Minute)))

	probe := readiness{mode: rsB.mode, watch: rsB.watch} // what /readyz and /metrics ask
	if tr := probe.RedisTopology(ctx); tr.Master != g.Master.Addr || tr.Failovers != 0 {
		t.Fatalf("RedisTopology before the failover = %+v; want master %s, 0 failovers", tr, g.Master.Addr)
	}

	// Healthy replication: min_replicas 1 is acknowledged.
	l, err := aSafe.Obtain(ctx, "sku:1", 0)
	if err != nil {
		t.Fatalf("min_replicas 1, replica in sync: Obtain = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Let the release reach the replica before freezing: a write, then
	// WAIT on the same connection (PoolSize 1), covers every earlier one.
	sync := redis.NewClient(&redis.Options{Addr: g.Master.Addr, PoolSize: 1})
	defer sync.Close()
	if err := sync.Set(ctx, "sync", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n := sync.Wait(ctx, 1, 10*time.Second).Val(); n != 1 {
		t.Fatalf("replica did not acknowledge within 10s (WAIT = %d)", n)
	}
	g.Links[0].Freeze() // from now on the replica hears nothing from the master

	// With min_replicas 1 the acquisition fails and leaves the key free.
	_, err = aSafe.Obtain(ctx, "sku:1", 0)
	if !errors.Is(err, service.ErrLockUnavailable) || !errors.Is(err, lock.ErrNotReplicated) {
		t.Fatalf("min_replicas 1, replication frozen: Obtain = %v; want ErrNotReplicated (lock unavailable)", err)
	}
	if n := g.Master.Client(t).Exists(ctx, prefix+"{sku:1}").Val(); n != 0 {
		t.Fatalf("min_replicas 1: the unacknowledged lease is still on the master; want released")
	}

	// Without it, A obtains a lease the replica never sees.
	la, err := a.Obtain(ctx, "sku:1", 0)
	if err != nil {
		t.Fatalf("A: Obtain = %v", err)
	}
	oldMaster := g.Master.Addr
	g.Master.Kill()
	g.Links[0].Cut()
	newMaster := g.WaitForMaster(t, oldMaster, 90*time.Second)
	if newMaster != g.Replicas[0].Addr {
		t.Fatalf("sentinels promoted %s; want the replica %s", newMaster, g.Replicas[0].Addr)
	}
	if tr := probe.RedisTopology(ctx); tr.Mode != config.RedisSentinel || tr.Master != newMaster || tr.Failovers != 1 {
		t.Errorf("RedisTopology after the failover = %+v; want mode sentinel, master %s, 1 failover seen", tr, newMaster)
	}

	// The promoted replica's counter missed A's increment: a counter-only
	// fence (INCR) would now give B a fence no greater than A's.
	replicaCounter, err := g.Replicas[0].Client(t).Get(ctx, prefix+"{sku:1}:fence").Int64()
	if err != nil {
		t.Fatalf("fence counter on the promoted replica: %v", err)
	}
	if replicaCounter+1 > la.Fence() {
		t.Fatalf("replica's counter %d already beyond A's fence %d: the replica saw A's INCR", replicaCounter, la.Fence())
	}

	// B obtains the same lease while A still believes it holds it. B
	// retries (one Obtain, one token) while its client finds the new master.
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lb, err := b.Obtain(bctx, "sku:1", 0)
	if err != nil {
		t.Fatalf("B: Obtain on the promoted replica = %v", err)
	}
	select {
	case <-la.Lost():
		t.Fatal("A's lease reported lost; this client runs without a watchdog")
	default:
	}
	t.Logf("two holders of sku:1: A fence %d (granted by the dead master), B fence %d (by the promoted replica)", la.Fence(), lb.Fence())
	if lb.Fence() <= la.Fence() {
		t.Fatalf("B's fence %d <= A's %d: the database could not refuse A", lb.Fence(), la.Fence())
	}

	// The database takes B's write and refuses A's, which comes after.
	store := repository.NewMySQL(testenv.DB(t, testenv.Database(t)))
	sku, err := store.CreateSKU(ctx, service.SKU{Name: "failover", TotalStock: 10, Stock: 10, PerUserLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(user string, fence int64) error {
		_, err := store.CommitBatch(ctx, service.Batch{
			SKUID: sku.ID, Fence: fence, Now: time.Now(),
			Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: user, Quantity: 1}},
		})
		return err
	}
	if err := commit("b", lb.Fence()); err != nil {
		t.Fatalf("B's write = %v", err)
	}
	// A reads the current version in its own transaction, so only the fence
	// can refuse it.
	if err := commit("a", la.Fence()); !errors.Is(err, service.ErrStaleFence) {
		t.Fatalf("A's write after B's = %v; want ErrStaleFence", err)
	}
	got, err := store.SKU(ctx, sku.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sold != 1 || got.Stock != 9 || got.Fence != lb.Fence() {
		t.Errorf("SKU after both writes: sold %d, stock %d, fence %d; want 1, 9, B's %d", got.Sold, got.Stock, got.Fence, lb.Fence())
	}
	if err := lb.Release(ctx); err != nil {
		t.Errorf("B: Release = %v", err)
	}
}
