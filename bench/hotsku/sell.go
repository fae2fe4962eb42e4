package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/audit"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// stock is every row's SKU: more than any row sells, so none sells out.
const stock = 1 << 40

// settings are production's defaults, v's variables over the
// environment's.
func settings(v variant, getenv func(string) string) (config.Config, error) {
	return config.Load("", func(k string) string {
		if val, ok := v.env[k]; ok {
			return val
		}
		return getenv(k)
	})
}

// instance is one service instance's order flow, as app.Serve builds it
// (its own pool and Redis client), and how to close it.
type instance struct {
	orders *service.Orders
	close  func(ctx context.Context) error
}

func newInstance(cfg config.Config, srv servers, i int, prefix string, holds *atomic.Int64) (*instance, error) {
	db, err := database.OpenMySQL(srv.dsn, database.Options{MaxOpenConns: cfg.MySQL.MaxOpenConns,
		MaxIdleConns: cfg.MySQL.MaxIdleConns, ConnMaxLife: cfg.MySQL.ConnMaxLife, IOTimeout: cfg.MySQL.IOTimeout})
	if err != nil {
		return nil, err
	}
	store := repository.NewMySQL(db, repository.WithPaymentTimeout(cfg.Order.PaymentTimeout))
	rc := redis.NewClient(&redis.Options{Addr: srv.redis.Addr})
	cfg.Lock.Prefix = prefix
	lc := lock.New(rc, append(wiring.OrderLockOptions(cfg), lock.WithOwner(wiring.InstanceName()+"#"+strconv.Itoa(i)))...)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	marks := locking.NewRedisMarks(rc, prefix+"soldout:", cfg.SoldOut.SharedTTL)
	skus := service.NewDirectory(store, marks, wiring.DirectoryConfig(cfg), log, nil)
	seller := engine.New(store, countHolds{locking.NewRedisLocker(lc), holds}, skus, marks, wiring.EngineConfig(cfg), log, nil)
	return &instance{
		orders: service.NewOrders(store, skus, seller, nil),
		close: func(ctx context.Context) error {
			err := seller.Shutdown(ctx)
			return errors.Join(err, lc.Close(), rc.Close(), database.Close(db))
		},
	}, nil
}

// countHolds counts the leases obtained: the lock's hand-offs.
type countHolds struct {
	engine.Locker
	n *atomic.Int64
}

func (c countHolds) Obtain(ctx context.Context, key string, rank int64) (engine.Lease, error) {
	l, err := c.Locker.Obtain(ctx, key, rank)
	if err == nil {
		c.n.Add(1)
	}
	return l, err
}

// sell sells one new SKU through n engines sharing the database and one
// lock prefix, o.buyers buyers at once (each buys one unit as a new user,
// again and again), measures o.duration after o.warmup, and audits the
// SKU once every engine has shut down.
func sell(ctx context.Context, o options, srv servers, cfg config.Config, n int) (row, error) {
	prefix := fmt.Sprintf("hotsku:%d:", time.Now().UnixNano())
	var holds atomic.Int64
	var ins []*instance
	closeAll := func() error { // every answer given: the audit reads a still database
		var errs []error
		for _, in := range ins {
			cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			errs = append(errs, in.close(cctx))
			cancel()
		}
		ins = nil
		return errors.Join(errs...)
	}
	defer closeAll()
	for i := range n {
		in, err := newInstance(cfg, srv, i, prefix, &holds)
		if err != nil {
			return row{}, err
		}
		ins = append(ins, in)
	}
	sku, err := createSKU(ctx, srv)
	if err != nil {
		return row{}, err
	}
	var (
		created atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		mu      sync.Mutex
		other   = map[string]int{}
	)
	for b := range o.buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := ins[b%n]
			for k := 0; k < 1<<24; k++ { // bounded; stop ends it long before
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				r := service.OrderRequest{SKUID: sku, UserID: "b" + strconv.Itoa(b) + "-" + strconv.Itoa(k), Quantity: 1}
				p, err := in.orders.Place(context.WithoutCancel(ctx), r)
				if res := service.ResultOf(err, p.Created); res == service.ResultCreated {
					created.Add(1)
				} else {
					mu.Lock()
					other[res]++
					mu.Unlock()
				}
			}
		}()
	}
	rw, err := measure(ctx, o, srv, fmt.Sprintf("%d engine(s)", n), func() int64 { return created.Load() }, &holds)
	close(stop)
	wg.Wait()
	if err = errors.Join(err, closeAll()); err != nil {
		return rw, err
	}
	rw.other = other
	return rw, check(ctx, srv, sku, created.Load())
}

// measure waits o.warmup, then counts o.duration.
func measure(ctx context.Context, o options, srv servers, name string, orders func() int64, holds *atomic.Int64) (row, error) {
	sampleNow := func() (counts, time.Time, error) {
		c, err := counters(ctx, srv)
		c.orders, c.holds = orders(), holds.Load()
		return c, time.Now(), err
	}
	select {
	case <-time.After(o.warmup):
	case <-ctx.Done():
		return row{}, ctx.Err()
	}
	a, at, err := sampleNow()
	if err != nil {
		return row{}, err
	}
	stopProfile, err := profile(o.cpuprofile, name)
	if err != nil {
		return row{}, err
	}
	select {
	case <-time.After(o.duration):
	case <-ctx.Done():
		stopProfile()
		return row{}, ctx.Err()
	}
	b, bt, err := sampleNow()
	stopProfile()
	return row{name: name, d: bt.Sub(at), counts: b.minus(a)}, err
}

// profiled numbers the rows profiled, in the order they ran.
var profiled atomic.Int64

// profile starts this process's CPU profile into dir (none when dir is
// empty), NN-name.pprof; the function it returns stops it.
func profile(dir, name string) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file := fmt.Sprintf("%02d-%s.pprof", profiled.Add(1), strings.NewReplacer(" ", "-", "(", "", ")", "", "@", "").Replace(name))
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// createSKU creates the row's SKU, of stock units, one per buyer, once
// the rows before are purged.
func createSKU(ctx context.Context, srv servers) (int64, error) {
	if err := settle(ctx, srv); err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	s, err := repository.NewMySQL(srv.admin).CreateSKU(ctx, service.SKU{Name: "hot", TotalStock: stock, Stock: stock, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	return s.ID, err
}

// check audits the SKU (docs/design.md's invariants: stock never
// negative, stock + sold = total, the orders hold exactly the units sold,
// the holdings agree) and that it sold exactly the orders answered
// created.
func check(ctx context.Context, srv servers, sku, created int64) error {
	sqlDB, err := srv.admin.DB()
	if err != nil {
		return err
	}
	r, err := audit.SKU(ctx, sqlDB, sku)
	if err != nil {
		return fmt.Errorf("audit of sku %d: %w", sku, err)
	}
	if !r.OK() {
		return fmt.Errorf("NOT EXACT: sku %d fails %v: %+v", sku, r.Failed(), r.Failures)
	}
	if r.Sold != created || r.LiveUnits() != created || r.Stock < 0 {
		return fmt.Errorf("NOT EXACT: sku %d sold %d, orders hold %d units, stock %d; %d orders answered created",
			sku, r.Sold, r.LiveUnits(), r.Stock, created)
	}
	return nil
}
