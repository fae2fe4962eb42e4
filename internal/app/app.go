// Package app wires the service together: it opens the stores, builds
// the lock, the order flow and the HTTP API, and runs them until the
// context ends, then shuts down in order.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// Migrate runs a migration command against the configured database and
// writes what it did to out.
func Migrate(ctx context.Context, cfg config.Config, command string, out io.Writer) error {
	if cfg.Embedded() {
		return errors.New("migrate: SECKILL_MYSQL_DSN (mysql.dsn) is required; the embedded store migrates itself")
	}
	db, err := database.OpenMySQL(cfg.MySQL.DSN, dbOptions(cfg))
	if err != nil {
		return err
	}
	defer database.Close(db)
	return database.Migrate(ctx, db, command, out)
}

func dbOptions(cfg config.Config) database.Options {
	return database.Options{MaxOpenConns: cfg.MySQL.MaxOpenConns, MaxIdleConns: cfg.MySQL.MaxIdleConns, ConnMaxLife: cfg.MySQL.ConnMaxLife}
}

// Serve runs the service until ctx ends. In embedded mode (no DSN) it
// starts in-process Redis and SQLite, seeds a demo SKU and prints how to
// use it on stdout. ready, if not nil, receives the listening address.
func Serve(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer, ready func(addr string)) error {
	var cl closers
	defer cl.close(log)

	generatedToken := cfg.Admin.Token == ""
	if generatedToken {
		cfg.Admin.Token = randomToken()
	}
	shoppers, err := shopperAuth(ctx, &cfg, log)
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, cfg, &cl)
	if err != nil {
		return err
	}
	store := repository.New(db, repository.GroupLinger(cfg.Order.Linger))
	rs, err := openRedis(cfg, &cl)
	if err != nil {
		return err
	}
	mx := metrics.New()
	lk, marks := redisLocking(cfg, rs, mx, &cl)
	var readyz handler.Readiness = readiness{store: store, redises: rs.clients, mode: rs.mode, watch: rs.watch}
	if len(rs.clients) > 0 {
		if err := mx.Register(newTopologyCollector(rs)); err != nil {
			return err
		}
	}
	if cfg.Lock.Backend == config.BackendZooKeeper {
		zkb, err := openZooKeeper(cfg, log, mx.Lock())
		if err != nil {
			return err
		}
		cl.add(zkb.Close)
		lk, marks, readyz = zkb.locker, zkb.marks, zkReadiness{store: store, zk: zkb}
	}
	orders := newOrders(cfg, store, lk, marks, mx, log)
	catalog := service.NewCatalog(store, orders, log)
	lifecycle, err := startLifecycle(ctx, cfg, store, sweeperLock(cfg, rs, lk), orders, mx, log, &cl)
	if err != nil {
		return err
	}
	var draining atomic.Bool
	flow, err := orderFlow(cfg, orders, store, lk, rs, mx)
	if err != nil {
		return err
	}
	locks, _ := lk.(service.LockInspector) // every lock of this package's (locks.go)
	api, err := newAPI(cfg, flow, catalog, readyz, mx, &draining, shoppers, lifecycle, locks, log)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTP.Addr, err)
	}
	if err := announce(ctx, cfg, catalog, rs.describe(), "http://"+ln.Addr().String(), generatedToken, stdout, log); err != nil {
		ln.Close()
		return err
	}
	if cfg.HTTP.DebugAddr != "" {
		stopDebug, err := serveDebug(cfg.HTTP.DebugAddr, log)
		if err != nil {
			ln.Close()
			return err
		}
		cl.add(stopDebug)
	}
	conns := newConnWatch(log)
	if err := mx.Register(conns.closed); err != nil {
		ln.Close()
		return err
	}
	return serveUntilDone(ctx, cfg, newHTTPServer(cfg, api, conns, log), ln, orders, &draining, ready, log)
}

// closers runs what was opened in reverse order.
type closers []func() error

func (c *closers) add(f func() error) { *c = append(*c, f) }

func (c closers) close(log *slog.Logger) {
	for i := len(c) - 1; i >= 0; i-- {
		if err := c[i](); err != nil {
			log.Warn("close", "err", err)
		}
	}
}

// openDatabase opens MySQL, or in embedded mode a migrated SQLite file in
// a temporary directory removed at exit.
func openDatabase(ctx context.Context, cfg config.Config, cl *closers) (*gorm.DB, error) {
	if !cfg.Embedded() {
		db, err := database.OpenMySQL(cfg.MySQL.DSN, dbOptions(cfg))
		if err != nil {
			return nil, err
		}
		cl.add(func() error { return database.Close(db) })
		return db, nil
	}
	dir, err := os.MkdirTemp("", "seckill-quickstart-")
	if err != nil {
		return nil, err
	}
	cl.add(func() error { return os.RemoveAll(dir) })
	db, err := database.OpenSQLite(filepath.Join(dir, "seckill.db"))
	if err != nil {
		return nil, err
	}
	cl.add(func() error { return database.Close(db) })
	if err := database.Migrate(ctx, db, "up", io.Discard); err != nil {
		return nil, err
	}
	return db, nil
}

// openRedis opens the Redis setup redis.mode names, or in embedded mode
// one client of an in-process Redis; no client without addresses
// (lock.backend zookeeper).
func openRedis(cfg config.Config, cl *closers) (*redisSetup, error) {
	addrs := cfg.Redis.Addrs
	if cfg.Embedded() && len(addrs) == 0 {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		cl.add(func() error { mr.Close(); return nil })
		addrs = []string{mr.Addr()}
	}
	rs, err := newRedisSetup(cfg, addrs)
	if err != nil {
		return nil, err
	}
	cl.add(rs.Close)
	return rs, nil
}

// redisLocking returns the per-SKU lock over the Redis setup (Redlock over
// independent masters) and the shared sold-out marks in Redis; none
// without Redis (lock.backend zookeeper).
func redisLocking(cfg config.Config, rs *redisSetup, mx *metrics.Metrics, cl *closers) (service.Locker, service.SoldOutMarks) {
	if len(rs.clients) == 0 {
		return nil, nil
	}
	lockOpts := append(OrderLockOptions(cfg), lock.WithObserver(mx.Lock()))
	lockOpts = append(lockOpts, lockReplicaOptions(cfg)...)
	lc := rs.lockClient(lockOpts...)
	cl.add(lc.Close) // before the Redis clients close (closers run in reverse)
	return NewLocker(lc), NewSoldOutMarks(rs.marks(), cfg.Lock.Prefix+"soldout:", cfg.SoldOut.SharedTTL)
}

// newOrders builds the order flow on a lock, the shared sold-out marks and
// the queue settings.
func newOrders(cfg config.Config, store service.Store, lk service.Locker, marks service.SoldOutMarks, mx *metrics.Metrics, log *slog.Logger) *service.Orders {
	return service.NewOrders(store, lk, marks, OrdersConfig(cfg), log, mx)
}

// newAPI builds the HTTP handler with its limits and metrics.
func newAPI(cfg config.Config, orders handler.Orders, catalog *service.Catalog, ready handler.Readiness, mx *metrics.Metrics, draining *atomic.Bool, shoppers handler.ShopperAuth, lifecycle handler.Lifecycle, locks service.LockInspector, log *slog.Logger) (http.Handler, error) {
	return handler.New(handler.Config{
		Orders:       orders,
		Catalog:      catalog,
		Ready:        ready,
		AdminToken:   cfg.Admin.Token,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes,
		Log:          log,
		Middleware:   []gin.HandlerFunc{mx.Middleware()},
		Extra:        map[string]http.Handler{"/metrics": mx.Handler()},
		Bench:        cfg.HTTP.BenchEndpoints,
		Limits: handler.Limits{
			PerUserRate: cfg.Limits.PerUserRate, PerUserBurst: cfg.Limits.PerUserBurst,
			PerIPRate: cfg.Limits.PerIPRate, PerIPBurst: cfg.Limits.PerIPBurst, MaxKeys: cfg.Limits.MaxKeys,
		},
		TrustedProxies: cfg.Limits.TrustedProxies,
		Draining:       draining,
		AccessLog:      cfg.Log.Access,
		ShopperAuth:    shoppers,
		Lifecycle:      lifecycle,
		PaymentTokens:  cfg.Auth.PaymentTokens,
		Locks:          locks,
	})
}

func newHTTPServer(cfg config.Config, api http.Handler, conns *connWatch, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           api,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         conns.hook,
	}
}

// announce says where the service runs. In embedded mode it seeds the
// demo SKU and prints the quick start; a generated admin token is printed
// (on stdout, never in the log).
func announce(ctx context.Context, cfg config.Config, catalog *service.Catalog, redisSetup string, url string, generatedToken bool, stdout io.Writer, log *slog.Logger) error {
	mode := "mysql+redis:" + redisSetup
	if cfg.Lock.Backend == config.BackendZooKeeper {
		mode = fmt.Sprintf("mysql+zookeeper(%d)", len(cfg.ZooKeeper.Addrs))
	}
	switch {
	case cfg.Embedded():
		mode = "embedded"
		demo, err := catalog.Create(ctx, service.NewSKU{Name: "Demo flash-sale item", Stock: 100, PerUserLimit: 1})
		if err != nil {
			return fmt.Errorf("seed demo sku: %w", err)
		}
		shopperToken := ""
		if cfg.Auth.Shopper == config.ShopperJWT && cfg.Auth.JWT.Secret != "" {
			if shopperToken, err = ShopperToken(cfg.Auth.JWT, "u-1", QuickStartTokenTTL); err != nil {
				return err
			}
		}
		printQuickStart(stdout, url, cfg.Admin.Tokens()[0], shopperToken, demo)
	case generatedToken:
		fmt.Fprintf(stdout, "admin token (generated): %s\n", cfg.Admin.Token)
	}
	log.Info("serving", "url", url, "mode", mode, "strategy", cfg.Order.Strategy)
	if !cfg.Embedded() {
		hintFirstSKU(ctx, catalog, log, url)
	}
	return nil
}

// serveUntilDone serves on ln until ctx ends, then drains: /readyz answers
// 503 for http.drain_delay, then the listener and the order queues shut
// down together within http.shutdown_timeout.
func serveUntilDone(ctx context.Context, cfg config.Config, srv *http.Server, ln net.Listener, orders *service.Orders, draining *atomic.Bool, ready func(addr string), log *slog.Logger) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}

	if cfg.HTTP.DrainDelay > 0 {
		draining.Store(true)
		log.Info("draining: /readyz answers 503 before the listener closes", "delay", cfg.HTTP.DrainDelay)
		t := time.NewTimer(cfg.HTTP.DrainDelay)
		select {
		case <-t.C:
		case err := <-serveErr:
			t.Stop()
			return fmt.Errorf("http: %w", err)
		}
	}
	log.Info("shutting down", "timeout", cfg.HTTP.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var httpErr, ordersErr error
	wg.Add(2)
	go func() { defer wg.Done(); httpErr = srv.Shutdown(sctx) }()
	go func() { defer wg.Done(); ordersErr = orders.Shutdown(sctx) }()
	wg.Wait()
	if err := errors.Join(httpErr, ordersErr); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func printQuickStart(w io.Writer, url, token, shopperToken string, demo service.SKU) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nseckill is running at %s (embedded mode: in-process Redis and SQLite, discarded at exit)\n", url)
	fmt.Fprintf(&b, "  admin token: %s\n", token)
	fmt.Fprintf(&b, "  demo SKU:    id %d, %q, %d units, %d per user\n\n", demo.ID, demo.Name, demo.Stock, demo.PerUserLimit)
	auth := ""
	if shopperToken != "" {
		fmt.Fprintf(&b, "  shopper token for u-1 (HS256, %s): %s\n\n", QuickStartTokenTTL, shopperToken)
		auth = " -H 'Authorization: Bearer " + shopperToken + "'"
	}
	fmt.Fprintf(&b, "Buy one:\n  curl -s -X POST %s/api/v1/orders%s -H 'Content-Type: application/json' -d '{\"sku_id\":%d,\"user_id\":\"u-1\",\"quantity\":1}'\n\n", url, auth, demo.ID)
	fmt.Fprintf(&b, "See the stock as an admin:\n  curl -s %s/admin/v1/skus/%d -H 'Authorization: Bearer %s'\n\n", url, demo.ID, token)
	fmt.Fprint(w, b.String())
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// serveDebug serves net/http/pprof on addr until the returned func runs.
func serveDebug(addr string, log *slog.Logger) (func() error, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen debug %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("pprof", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return srv.Close, nil
}
