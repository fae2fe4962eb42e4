package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock/zookeeper"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// TestZooKeeperRecreatedFromEmpty_SellsOnAndStillFences: the ensemble is
// lost and a new one is started from empty. Its zxids restart low, below
// the fence the SKU row holds from the old one, so without the service's
// way out every write would be refused as stale until someone ran UPDATE
// skus SET fence=0. The first batch on the new ensemble finds the stored
// fence above the ensemble's horizon, replaces it (compare-and-set) and
// sells; from then on the new ensemble's fences guard the row as before:
// a superseded holder's write is still refused.
func TestZooKeeperRecreatedFromEmpty_SellsOnAndStillFences(t *testing.T) {
	old := testenv.StartZooKeeper(t)
	dsn := testenv.Database(t)
	store := repository.NewMySQL(testenv.DB(t, dsn))
	root := "/" + testenv.Name("recreated")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	before := zkInstance(t, dsn, old.Addrs(), root)
	waitLockUp(t, before)
	skuID := newSKU(t, before, 100, 1)
	sold := 0
	buy := func(url, user string, want int) {
		t.Helper()
		body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, skuID, user)
		status, answer := call(t, http.MethodPost, url+"/api/v1/orders", body, "Idempotency-Key", user)
		if status != want {
			t.Fatalf("order of %s = %d %v; want %d", user, status, answer, want)
		}
		if status == http.StatusCreated {
			sold++
		}
	}
	for i := range 5 {
		buy(before, fmt.Sprintf("old-%d", i), http.StatusCreated)
	}
	// The old ensemble lived longer than the new one will have by the
	// first sale: its zxids went well past the new one's first ones.
	conn := testenv.ZKConn(t, old.Addrs(), config.Default().ZooKeeper.SessionTimeout, nil)
	for i := range 200 {
		if _, err := conn.Create(fmt.Sprintf("%s-filler-%d", root, i), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		buy(before, fmt.Sprintf("old-late-%d", i), http.StatusCreated)
	}
	oldFence := skuFence(ctx, t, store, skuID)
	if oldFence < service.ZooKeeperFences {
		t.Fatalf("fence after sales on ZooKeeper = %d; want a ZooKeeper fence (>= %d)", oldFence, service.ZooKeeperFences)
	}
	old.Servers[0].Stop() // lost with its data

	fresh := testenv.StartZooKeeper(t)
	after := zkInstance(t, dsn, fresh.Addrs(), root)
	waitLockUp(t, after) // else the first batches sell unlocked, degraded
	for i := range 5 {
		buy(after, fmt.Sprintf("new-%d", i), http.StatusCreated)
	}
	newFence := skuFence(ctx, t, store, skuID)
	if newFence >= oldFence || newFence < service.ZooKeeperFences {
		t.Errorf("fence after the recreated ensemble's sales = %d; want one of its own, below the old ensemble's %d", newFence, oldFence)
	}
	stock, soldAPI := skuState(t, after, skuID)
	if int(soldAPI) != sold || int(stock) != 100-sold {
		t.Errorf("sold %v stock %v; want %d sold, %d left", soldAPI, stock, sold, 100-sold)
	}

	// A holder superseded on the new ensemble is still refused.
	_, err := store.CommitBatch(ctx, service.Batch{SKUID: skuID, Fence: newFence - 1, Now: time.Now().UTC(),
		Requests: []service.OrderRequest{{SKUID: skuID, UserID: "superseded", Quantity: 1}}})
	if !errors.Is(err, service.ErrStaleFence) {
		t.Errorf("CommitBatch(fence %d below the stored %d) = %v; want ErrStaleFence", newFence-1, newFence, err)
	}
	if _, soldAfter := skuState(t, after, skuID); int(soldAfter) != sold {
		t.Errorf("sold %v after the refused write; want %d", soldAfter, sold)
	}
}

func skuFence(ctx context.Context, t *testing.T, store *repository.MySQL, id int64) int64 {
	t.Helper()
	s, err := store.SKU(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Fence
}

// waitLockUp waits (at most 30s) until the instance's /readyz says ok: its
// ZooKeeper session is up, so batches run under the lock.
func waitLockUp(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, ready := call(t, http.MethodGet, url+"/readyz", "")
		if ready["status"] == "ok" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of %s = %v 30s after start; want ok", url, ready)
		}
		time.Sleep(50 * time.Millisecond) // polling for the session, bounded above
	}
}

// TestZooKeeper_SupersededHolderIsNotMistakenForARecreatedEnsemble: the
// other side of the horizon. Right after the service obtains its lease, a
// later holder of the same ensemble (a higher zxid) commits first. The
// service's batch is refused as stale and, since that stored fence is
// within the ensemble's horizon, it is not replaced: the service drops its
// lease and sells under a fresh one, whose fence is above the later
// holder's.
func TestZooKeeper_SupersededHolderIsNotMistakenForARecreatedEnsemble(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	store := repository.NewMySQL(testenv.DB(t, testenv.Database(t)))
	root := "/" + testenv.Name("superseded")
	pc := config.Default()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sku, err := store.CreateSKU(ctx, service.SKU{Name: "superseded", TotalStock: 10, Stock: 10, PerUserLimit: 10, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	conn := testenv.ZKConn(t, z.Addrs(), pc.ZooKeeper.SessionTimeout, nil)
	other := zookeeper.New(testenv.ZKConn(t, z.Addrs(), pc.ZooKeeper.SessionTimeout, nil), zookeeper.Options{Root: root + "/locks", FenceBase: service.ZooKeeperFences})
	var later int64
	locker := &interferingLocker{Locker: locking.NewZooKeeperLocker(zookeeper.New(conn, zookeeper.Options{Root: root + "/locks", FenceBase: service.ZooKeeperFences})), interfere: func(ours int64) {
		l, err := other.Obtain(ctx, "elsewhere")
		if err != nil {
			t.Error(err)
			return
		}
		defer l.Release(ctx)
		later = l.Fence()
		if _, err := store.CommitBatch(ctx, service.Batch{SKUID: sku.ID, Fence: later, Now: time.Now().UTC(),
			Requests: []service.OrderRequest{{SKUID: sku.ID, UserID: "later-holder", Quantity: 1}}}); err != nil {
			t.Errorf("the later holder's commit (fence %d, ours %d): %v", later, ours, err)
		}
	}}
	skus := service.NewDirectory(store, locking.NewZooKeeperMarks(conn, root+"/soldout", pc.SoldOut.SharedTTL), wiring.DirectoryConfig(pc), testenv.Logger(), nil)
	seller := engine.New(store, locker, skus, nil, wiring.EngineConfig(pc), testenv.Logger(), nil)
	orders := service.NewOrders(store, skus, seller, nil)
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		if err := seller.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})

	if _, err := orders.Place(ctx, service.OrderRequest{SKUID: sku.ID, UserID: "buyer", Quantity: 1}); err != nil {
		t.Fatalf("Place after a later holder committed = %v; want placed under a fresh lease", err)
	}
	got, err := store.SKU(ctx, sku.ID)
	if err != nil {
		t.Fatal(err)
	}
	if later == 0 || got.Fence <= later {
		t.Errorf("stored fence %d after the later holder's %d; want a fresh lease's, above it (never ours replacing it)", got.Fence, later)
	}
	if got.Sold != 2 || got.Stock != 8 {
		t.Errorf("sold %d stock %d; want 2, 8", got.Sold, got.Stock)
	}
}

// interferingLocker obtains ZooKeeper locks and, once, right after the
// first one is obtained, runs interfere with its fence.
type interferingLocker struct {
	engine.Locker // the ZooKeeper adapter's
	once          sync.Once
	interfere     func(ours int64)
}

func (l *interferingLocker) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	lk, err := l.Locker.Obtain(ctx, key, rank)
	if err != nil {
		return nil, err
	}
	l.once.Do(func() { l.interfere(lk.Fence()) })
	return lk, nil
}
