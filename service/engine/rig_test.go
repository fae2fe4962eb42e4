package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/redis"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/engine"
)

// rig is one service instance on a real MariaDB database and real Redis.
type rig struct {
	db      *gorm.DB
	store   service.Store
	orders  *service.Orders
	seller  *engine.Seller
	skus    *service.Directory
	catalog *service.Catalog
	obs     *observer
	rdb     *goredis.Client
	prefix  string        // lock and mark keys
	pc      config.Config // the settings it runs
}

type rigOptions struct {
	redisAddr string // default: the shared test Redis
	store     func(service.Store) service.Store
	cfg       func(*engine.Config)
	skus      func(*service.DirectoryConfig)
	prefix    string // lock key prefix; default: the test's own
	locker    func(service.Locker) service.Locker
	settings  *config.Config // default: config.Default(), production's
}

func newRig(t *testing.T, dsn string, o rigOptions) *rig {
	t.Helper()
	db := testenv.DB(t, dsn)
	var store service.Store = repository.NewMySQL(db)
	if o.store != nil {
		store = o.store(store)
	}
	addr := o.redisAddr
	if addr == "" {
		addr = testenv.RedisAddr()
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	prefix := o.prefix
	if prefix == "" {
		prefix = testenv.Name("test:orders:") + ":"
	}
	// Production defaults (config.Default): the lease, the watchdog, the
	// hold, the lock wait and the retries are what production runs.
	pc := config.Default()
	if o.settings != nil {
		pc = *o.settings
	}
	pc.Lock.Prefix = prefix
	cfg, dcfg := app.EngineConfig(pc), app.DirectoryConfig(pc)
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	if o.skus != nil {
		o.skus(&dcfg)
	}
	obs := &observer{depth: make(chan int, 100000)}
	lc := lock.New(rdb, app.OrderLockOptions(pc)...)
	t.Cleanup(func() { lc.Close() })
	var locker service.Locker = redis.NewLocker(lc)
	if o.locker != nil {
		locker = o.locker(locker)
	}
	marks := redis.NewMarks(rdb, prefix+"soldout:", pc.SoldOut.SharedTTL)
	r := &rig{db: db, store: store, obs: obs, rdb: rdb, prefix: prefix, pc: pc}
	r.orders, r.skus, r.seller = newFlow(t, store, locker, marks, marks, dcfg, cfg, obs)
	r.catalog = service.NewCatalog(store, r.skus, testenv.Logger())
	return r
}

// newFlow builds one instance's order flow as app.Serve does: the SKU
// directory, the engine (shut down when tb ends) and the rules in front.
// board and obs may be nil.
func newFlow(tb testing.TB, store service.Store, locker service.Locker, marks service.SoldOutMarks, board engine.PlaceBoard,
	dcfg service.DirectoryConfig, cfg engine.Config, obs *observer) (*service.Orders, *service.Directory, *engine.Seller) {
	tb.Helper()
	var o interface {
		service.Observer
		engine.Observer
	}
	if obs != nil {
		o = obs
	}
	skus := service.NewDirectory(store, marks, dcfg, testenv.Logger(), o)
	seller := engine.New(store, locker, skus, board, cfg, testenv.Logger(), o)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := seller.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
	})
	return service.NewOrders(store, skus, seller, o), skus, seller
}

// newOrders is newFlow's order flow alone.
func newOrders(tb testing.TB, store service.Store, locker service.Locker, marks service.SoldOutMarks, board engine.PlaceBoard,
	dcfg service.DirectoryConfig, cfg engine.Config, obs *observer) *service.Orders {
	tb.Helper()
	o, _, _ := newFlow(tb, store, locker, marks, board, dcfg, cfg, obs)
	return o
}

func createSKU(t *testing.T, store service.Store, stock, limit int64) service.SKU {
	t.Helper()
	now := time.Now().UTC()
	s, err := store.CreateSKU(context.Background(), service.SKU{Name: "test", TotalStock: stock, Stock: stock, PerUserLimit: limit, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// observer records queue depths so tests can wait for "queued" without sleeping.
type observer struct {
	depth       chan int
	unpublished atomic.Int64
}

func (o *observer) OrderResult(string) {}
func (o *observer) QueueDepth(_ int64, d int) {
	select {
	case o.depth <- d:
	default:
	}
}
func (o *observer) QueueRejected(int64)                  {}
func (o *observer) Batch(int, time.Duration, int, error) {}
func (o *observer) Degraded(bool)                        {}
func (o *observer) SoldOutFastPath()                     {}
func (o *observer) MarkUnpublished()                     { o.unpublished.Add(1) }
func (o *observer) KnownRow(bool)                        {}
func (o *observer) Unconfirmed(int)                      {}

// waitDepth waits until the queue of the test's SKU reported depth >= n.
func (o *observer) waitDepth(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case d := <-o.depth:
			if d >= n {
				return
			}
		case <-timeout:
			t.Fatalf("queue never reached depth %d", n)
		}
	}
}

// gatedStore blocks the first CommitBatch until release is closed.
type gatedStore struct {
	service.Store
	entered, release chan struct{}
	once             sync.Once
	commits          atomic.Int64
}

func gate(s service.Store) *gatedStore {
	return &gatedStore{Store: s, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, g.CommitBatch)
}

func (g *gatedStore) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	g.commits.Add(1)
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.Store.CommitBatch(ctx, b)
}

// checkInvariants asserts docs/design.md's invariants 1–4 for a SKU and returns
// the units sold.
func checkInvariants(t *testing.T, db *gorm.DB, skuID int64) int64 {
	t.Helper()
	return testenv.CheckInvariants(t, db, skuID)
}

// buyers sends n distinct buyers plus every tenth again, all released at
// once, and counts the answers by result. onCreated runs after each sale.
func buyers(t *testing.T, o *service.Orders, skuID int64, n int, onCreated func(int64)) map[string]int {
	t.Helper()
	var (
		mu      sync.Mutex
		results = map[string]int{}
		created atomic.Int64
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	buy := func(user string) {
		defer wg.Done()
		<-start
		p, err := o.Place(context.Background(), service.OrderRequest{SKUID: skuID, UserID: user, Quantity: 1})
		mu.Lock()
		results[service.ResultOf(err, p.Created)]++
		mu.Unlock()
		if err == nil && onCreated != nil {
			onCreated(created.Add(1))
		}
	}
	for i := range n {
		wg.Add(1)
		go buy(fmt.Sprintf("u-%d", i))
		if i%10 == 0 {
			wg.Add(1)
			go buy(fmt.Sprintf("u-%d", i))
		}
	}
	close(start)
	wg.Wait()
	return results
}
