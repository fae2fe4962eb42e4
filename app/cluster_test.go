package app

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
)

// TestCluster_FollowsAFailoverWithoutWaitingForTheReloadInterval: a
// Cluster master is SIGKILLed and the cluster promotes its replica. A dead
// master answers no MOVED, so go-redis on its own keeps dialling it until
// its slot-map reload interval (60s) runs out; the service's client must
// instead obtain the SKU's lock on the promoted replica soon after the
// promotion (bounded here at 15s, a quarter of that interval). The new
// lease's fence exceeds the old one's.
func TestCluster_FollowsAFailoverWithoutWaitingForTheReloadInterval(t *testing.T) {
	cl := testenv.StartCluster(t, 3, 1)
	cfg := config.Default() // production defaults: the client as it runs
	cfg.Redis.Mode = config.RedisCluster
	cfg.Redis.Addrs = cl.Addrs()
	rs := openTestRedis(t, cfg)
	cc := rs.clients[0].(*redis.ClusterClient)
	ctx := context.Background()
	const prefix = "seckill:lock:"
	locker := locking.NewRedisLocker(rs.lockClient(lock.WithPrefix(prefix)))

	before, err := locker.Obtain(ctx, "sku:7", 0)
	if err != nil {
		t.Fatalf("Obtain before the failover = %v", err)
	}
	if err := before.Release(ctx); err != nil {
		t.Fatal(err)
	}
	key := prefix + "{sku:7}"
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	old := node.Options().Addr
	victim := cl.Node(old)
	if victim == nil {
		t.Fatalf("the key's master %s is none of the cluster's nodes", old)
	}
	victim.Kill()
	promoted := cl.WaitForSlotMaster(t, key, old, 90*time.Second)

	deadline := time.Now().Add(15 * time.Second)
	var attempts int
	for {
		attempts++
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		after, err := locker.Obtain(octx, "sku:7", 0)
		cancel()
		if err == nil {
			if after.Fence() <= before.Fence() {
				t.Errorf("fence after the failover %d <= %d before it", after.Fence(), before.Fence())
			}
			if err := after.Release(ctx); err != nil {
				t.Errorf("Release on the promoted replica = %v", err)
			}
			t.Logf("obtained on %s after %d attempt(s) following the promotion", promoted, attempts)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Obtain still failing 15s after %s was promoted (%d attempts): %v", promoted, attempts, err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the client's recovery, bounded above
	}
}
