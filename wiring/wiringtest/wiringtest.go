// Package wiringtest builds, for tests, one service instance's order flow
// as app.Serve builds it, on a real MariaDB database and real Redis, with
// production's settings unless a test says otherwise; and the helpers the
// tests of service and engine share around it. It imports no app: the
// settings come through package wiring, as app.Serve's do.
package wiringtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// Observer is what an instance reports to: the domain's and the engine's
// observers at once.
type Observer interface {
	service.Observer
	engine.Observer
}

// Instance is one service instance on a real MariaDB database and real
// Redis.
type Instance struct {
	DB       *gorm.DB
	Store    *repository.MySQL // unwrapped: Options.Commits and Reads wrap what the flow sees
	Orders   *service.Orders
	Seller   *engine.Seller
	SKUs     *service.Directory
	Catalog  *service.Catalog
	Redis    *redis.Client
	Prefix   string        // lock and mark keys
	Settings config.Config // the settings it runs
}

// Options change an Instance from production's.
type Options struct {
	RedisAddr string                                        // default: the shared test Redis
	Commits   func(engine.Committer) engine.Committer       // wraps what the engine commits through
	Reads     func(service.OrderReader) service.OrderReader // wraps what the rules and the SKU directory read
	Engine    func(*engine.Config)
	SKUs      func(*service.DirectoryConfig)
	Prefix    string // lock key prefix; default: the test's own
	Locker    func(engine.Locker) engine.Locker
	Settings  *config.Config // default: config.Default(), production's
	Observer  Observer       // nil: none
}

// New builds an instance on a database of dsn; everything it starts ends
// with t.
func New(t *testing.T, dsn string, o Options) *Instance {
	t.Helper()
	in := &Instance{DB: testenv.DB(t, dsn), Prefix: o.Prefix, Settings: config.Default()}
	// Production defaults (config.Default): the lease, the watchdog, the
	// hold, the lock wait and the retries are what production runs.
	if o.Settings != nil {
		in.Settings = *o.Settings
	}
	in.Store = repository.NewMySQL(in.DB, repository.WithPaymentTimeout(in.Settings.Order.PaymentTimeout))
	var (
		commits engine.Committer    = in.Store
		reads   service.OrderReader = in.Store
	)
	if o.Commits != nil {
		commits = o.Commits(commits)
	}
	if o.Reads != nil {
		reads = o.Reads(reads)
	}
	addr := o.RedisAddr
	if addr == "" {
		addr = testenv.RedisAddr()
	}
	in.Redis = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { in.Redis.Close() })
	if in.Prefix == "" {
		in.Prefix = testenv.Name("test:orders:") + ":"
	}
	in.Settings.Lock.Prefix = in.Prefix
	cfg, dcfg := wiring.EngineConfig(in.Settings), wiring.DirectoryConfig(in.Settings)
	if o.Engine != nil {
		o.Engine(&cfg)
	}
	if o.SKUs != nil {
		o.SKUs(&dcfg)
	}
	lc := lock.New(in.Redis, wiring.OrderLockOptions(in.Settings)...)
	t.Cleanup(func() { lc.Close() })
	var locker engine.Locker = locking.NewRedisLocker(lc)
	if o.Locker != nil {
		locker = o.Locker(locker)
	}
	marks := locking.NewRedisMarks(in.Redis, in.Prefix+"soldout:", in.Settings.SoldOut.SharedTTL)
	in.Orders, in.SKUs, in.Seller = NewFlow(t, commits, reads, locker, marks, marks, dcfg, cfg, o.Observer)
	in.Catalog = service.NewCatalog(in.Store, in.Store, in.SKUs, testenv.Logger())
	return in
}

// NewFlow builds one instance's order flow as app.Serve does: the SKU
// directory reading reads, the engine committing through commits (shut
// down when tb ends) and the rules in front. board and obs may be nil.
func NewFlow(tb testing.TB, commits engine.Committer, reads service.OrderReader, locker engine.Locker, marks service.SoldOutMarks, board engine.PlaceBoard,
	dcfg service.DirectoryConfig, cfg engine.Config, obs Observer) (*service.Orders, *service.Directory, *engine.Seller) {
	tb.Helper()
	skus := service.NewDirectory(reads, marks, dcfg, testenv.Logger(), obs)
	seller := engine.New(commits, locker, skus, board, cfg, testenv.Logger(), obs)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := seller.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
	})
	return service.NewOrders(reads, skus, seller, obs), skus, seller
}

// CreateSKU creates a SKU of stock units, limit per buyer, on sale now.
func CreateSKU(t *testing.T, store service.CatalogStore, stock, limit int64) service.SKU {
	t.Helper()
	now := time.Now().UTC()
	s, err := store.CreateSKU(context.Background(), service.SKU{Name: "test", TotalStock: stock, Stock: stock, PerUserLimit: limit, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Await waits until reached is closed, for at most a minute (a bound, not
// a measurement). An answer on ended first means that what was to reach
// that point ended before it, say a Place refused before its commit: the
// test fails with that answer, as it does when the minute passes, instead
// of blocking until the package's timeout.
func Await[T any](t testing.TB, reached <-chan struct{}, ended <-chan T, what string) {
	t.Helper()
	bound := time.NewTimer(time.Minute)
	defer bound.Stop()
	select {
	case <-reached:
	case v := <-ended:
		t.Fatalf("%s: it ended before, answering %v", what, v)
	case <-bound.C:
		t.Fatalf("%s: not within a minute", what)
	}
}

// GatedStore blocks the first CommitBatch until Release is closed.
type GatedStore struct {
	engine.Committer
	Entered, Release chan struct{}
	once             sync.Once
	Commits          atomic.Int64
}

// Gate wraps s.
func Gate(s engine.Committer) *GatedStore {
	return &GatedStore{Committer: s, Entered: make(chan struct{}), Release: make(chan struct{})}
}

// CommitRound commits each batch alone, through CommitBatch.
func (g *GatedStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, g.CommitBatch)
}

// CommitBatch counts the commit; the first waits for Release, or for its
// ctx to end, as a real transaction's wait would (then it fails): a test
// that stops before Release leaves no worker blocked for its cleanup.
func (g *GatedStore) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	g.Commits.Add(1)
	g.once.Do(func() {
		close(g.Entered)
		select {
		case <-g.Release:
		case <-ctx.Done():
		}
	})
	return g.Committer.CommitBatch(ctx, b)
}

// Buyers sends n distinct buyers plus every tenth again, all released at
// once, and counts the answers by result. onCreated runs after each sale.
func Buyers(t *testing.T, o *service.Orders, skuID int64, n int, onCreated func(int64)) map[string]int {
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
