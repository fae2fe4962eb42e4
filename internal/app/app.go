// Package app wires the service together: it opens the stores, builds the
// lock, the order flow and the HTTP API, and runs them until the context
// ends.
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
	"github.com/seckill/seckill/internal/redis"
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
	opt := dbOptions(cfg)
	opt.IOTimeout = 0 // an ALTER of a large table may rightly run for long
	db, err := database.OpenMySQL(cfg.MySQL.DSN, opt)
	if err != nil {
		return err
	}
	defer database.Close(db)
	return database.Migrate(ctx, db, command, out)
}

func dbOptions(cfg config.Config) database.Options {
	return database.Options{MaxOpenConns: cfg.MySQL.MaxOpenConns, MaxIdleConns: cfg.MySQL.MaxIdleConns, ConnMaxLife: cfg.MySQL.ConnMaxLife,
		IOTimeout: cfg.MySQL.IOTimeout}
}

// Serve runs the service until ctx ends, then shuts it down. With no DSN
// it runs embedded: in-process Redis and SQLite, and a demo SKU. ready,
// if not nil, gets the listening address.
func Serve(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer, ready func(addr string)) error {
	var cl closers
	defer cl.close(log)

	generatedToken := cfg.Admin.Token == ""
	if generatedToken {
		cfg.Admin.Token = randomToken()
	}
	generatedSecret := cfg.Embedded() && cfg.Auth.Shopper == config.ShopperJWT && !cfg.Auth.JWT.KeySet()
	shoppers, err := shopperAuth(ctx, &cfg, log)
	if err != nil {
		return err
	}
	mx := metrics.New()
	guard := database.NewPrimaryGuard()
	db, err := openDatabase(ctx, cfg, mx, guard, &cl)
	if err != nil {
		return err
	}
	if err := registerPool(mx, db); err != nil {
		return err
	}
	repl, err := openReplicas(cfg, db, guard, mx, log, &cl)
	if err != nil {
		return err
	}
	var confirm service.Replicas
	if repl != nil && cfg.MySQL.MinReplicas > 0 {
		confirm = repl
	}
	store := newStore(cfg, db, confirm)
	rs, err := openRedis(cfg, &cl)
	if err != nil {
		return err
	}
	lk, marks := redisLocking(cfg, rs, mx, &cl)
	var readyz handler.Readiness = readiness{store: store, redises: rs.clients, mode: rs.mode, watch: rs.watch, repl: repl}
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
	orders := newOrders(cfg, store, lk, marks, confirm, mx, log)
	catalog := service.NewCatalog(store, orders, log)
	lifecycle, err := startLifecycle(ctx, cfg, store, sweeperLock(cfg, rs, lk), orders, mx, log, &cl)
	if err != nil {
		return err
	}
	var draining atomic.Bool
	locks, _ := lk.(service.LockInspector) // every Locker of internal/redis and internal/zookeeper
	api, operator, err := newAPI(cfg, orders, catalog, readyz, mx, &draining, shoppers, lifecycle, locks, log)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTP.Addr, err)
	}
	if err := announce(ctx, cfg, catalog, rs.describe(), "http://"+ln.Addr().String(), generatedToken, generatedSecret, stdout, log); err != nil {
		ln.Close()
		return err
	}
	if cfg.HTTP.DebugAddr != "" && cfg.HTTP.DebugAddr != cfg.HTTP.AdminAddr {
		stopDebug, err := serveDebug(cfg.HTTP.DebugAddr, log)
		if err != nil {
			ln.Close()
			return err
		}
		cl.add(stopDebug)
	}
	var admin *listening
	if cfg.HTTP.AdminAddr != "" {
		if admin, err = listenAdmin(cfg, operator, log); err != nil {
			ln.Close()
			return err
		}
	}
	conns := newConnWatch(log)
	if err := mx.Register(conns.closed); err != nil {
		ln.Close()
		if admin != nil {
			admin.ln.Close()
		}
		return err
	}
	return serveUntilDone(ctx, cfg, &listening{newHTTPServer(cfg, api, conns, log), ln}, admin, orders, &draining, ready, log)
}

// listening is a server and the listener it is to serve.
type listening struct {
	srv *http.Server
	ln  net.Listener
}

// listenAdmin listens on http.admin_addr for the operator's routes
// (/admin, /internal, /metrics), and pprof when http.debug_addr is the
// same address.
func listenAdmin(cfg config.Config, operator http.Handler, log *slog.Logger) (*listening, error) {
	mux := http.NewServeMux()
	mux.Handle("/", operator)
	if cfg.HTTP.DebugAddr == cfg.HTTP.AdminAddr {
		mountPprof(mux)
	}
	ln, err := net.Listen("tcp", cfg.HTTP.AdminAddr)
	if err != nil {
		return nil, fmt.Errorf("listen admin %s: %w", cfg.HTTP.AdminAddr, err)
	}
	log.Info("admin listener", "url", "http://"+ln.Addr().String()+"/metrics")
	return &listening{&http.Server{
		Handler:           mux,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      0, // pprof's profile and trace stream for as long as asked
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}, ln}, nil
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
func openDatabase(ctx context.Context, cfg config.Config, obs database.Observer, guard *database.PrimaryGuard, cl *closers) (*gorm.DB, error) {
	if !cfg.Embedded() {
		opt := dbOptions(cfg)
		opt.Observer, opt.Guard = obs, guard
		db, err := database.OpenMySQL(cfg.MySQL.DSN, opt)
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

// openReplicas starts confirming commits on mysql.replicas; nil without
// any. The pools of the replicas close with it.
func openReplicas(cfg config.Config, db *gorm.DB, guard *database.PrimaryGuard, mx *metrics.Metrics, log *slog.Logger, cl *closers) (*repository.Replicas, error) {
	if len(cfg.MySQL.Replicas) == 0 || cfg.Embedded() {
		return nil, nil
	}
	var nodes []repository.ReplicaConfig
	for i, dsn := range cfg.MySQL.Replicas {
		rdb, addr, err := database.OpenReplica(dsn, cfg.MySQL.ReplicaTimeout)
		if err != nil {
			for _, n := range nodes {
				n.DB.Close()
			}
			return nil, fmt.Errorf("mysql.replicas item %d: %w", i+1, err)
		}
		nodes = append(nodes, repository.ReplicaConfig{DB: rdb, Addr: addr})
	}
	primary, err := db.DB()
	if err != nil {
		return nil, err
	}
	repl := repository.NewReplicas(nodes, cfg.MySQL.MinReplicas, cfg.MySQL.ReplicaTimeout, primary, guard, mx, log)
	cl.add(repl.Close)
	if err := mx.Register(newReplicationCollector(repl)); err != nil {
		return nil, err
	}
	return repl, nil
}

// registerPool exports db's pool statistics.
func registerPool(mx *metrics.Metrics, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return mx.Pool(sqlDB)
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
	return redis.NewLocker(lc), redis.NewMarks(rs.marks(), cfg.Lock.Prefix+"soldout:", cfg.SoldOut.SharedTTL)
}

// newOrders builds the order flow on a lock, the shared sold-out marks and
// the queue settings.
func newOrders(cfg config.Config, store service.Store, lk service.Locker, marks service.SoldOutMarks, confirm service.Replicas, mx *metrics.Metrics, log *slog.Logger) *service.Orders {
	ocfg := OrdersConfig(cfg)
	ocfg.Replicas = confirm
	return service.NewOrders(store, lk, marks, ocfg, log, mx)
}

// newAPI builds the HTTP handler with its limits and metrics; with
// http.admin_addr, also the operator's (nil without), and the API's
// answers none of the operator's routes.
func newAPI(cfg config.Config, orders handler.Orders, catalog *service.Catalog, ready handler.Readiness, mx *metrics.Metrics, draining *atomic.Bool, shoppers handler.ShopperAuth, lifecycle handler.Lifecycle, locks service.LockInspector, log *slog.Logger) (api, operator http.Handler, err error) {
	hc := handler.Config{
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
		ReadyCache:     cfg.HTTP.ReadyCache,
		AccessLog:      cfg.Log.Access,
		ShopperAuth:    shoppers,
		Lifecycle:      lifecycle,
		PaymentTokens:  cfg.Auth.PaymentTokens,
		Locks:          locks,
	}
	if cfg.HTTP.AdminAddr != "" {
		return handler.NewSplit(hc)
	}
	api, err = handler.New(hc)
	return api, nil, err
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

// announce says where the service runs; in embedded mode it seeds the
// demo SKU and prints the quick start. A generated admin token or HS256
// secret goes to stdout, never to the log.
func announce(ctx context.Context, cfg config.Config, catalog *service.Catalog, redisSetup string, url string, generatedToken, generatedSecret bool, stdout io.Writer, log *slog.Logger) error {
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
		var shoppers []demoShopper
		if cfg.Auth.Shopper == config.ShopperJWT && cfg.Auth.JWT.Secret != "" {
			for _, sub := range quickStartShoppers {
				tok, err := ShopperToken(cfg.Auth.JWT, sub, QuickStartTokenTTL)
				if err != nil {
					return err
				}
				shoppers = append(shoppers, demoShopper{sub, tok})
			}
		}
		qs := quickStart{url: url, adminToken: cfg.Admin.Tokens()[0], shoppers: shoppers, demo: demo}
		if generatedSecret {
			qs.mint = mintCommand(cfg.Auth.JWT)
		}
		printQuickStart(stdout, qs)
	case generatedToken:
		fmt.Fprintf(stdout, "admin token (generated): %s\n", cfg.Admin.Token)
	}
	log.Info("serving", "url", url, "mode", mode)
	if !cfg.Embedded() {
		hintFirstSKU(ctx, catalog, log, url)
	}
	return nil
}

// serveUntilDone serves the API and admin listeners until ctx ends, then
// drains: /readyz answers 503 for http.drain_delay, then listeners and
// order queues shut down within http.shutdown_timeout.
func serveUntilDone(ctx context.Context, cfg config.Config, api, admin *listening, orders *service.Orders, draining *atomic.Bool, ready func(addr string), log *slog.Logger) error {
	servers := []*listening{api}
	if admin != nil {
		servers = append(servers, admin)
	}
	serveErr := make(chan error, len(servers))
	for _, l := range servers {
		go func() { serveErr <- l.srv.Serve(l.ln) }()
	}
	if ready != nil {
		ready(api.ln.Addr().String())
	}
	select {
	case err := <-serveErr:
		shutdownNow(servers)
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
			shutdownNow(servers)
			return fmt.Errorf("http: %w", err)
		}
	}
	log.Info("shutting down", "timeout", cfg.HTTP.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(servers)+1)
	for i, l := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = l.srv.Shutdown(sctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); errs[len(servers)] = orders.Shutdown(sctx) }()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// shutdownNow closes every server after one of them failed.
func shutdownNow(servers []*listening) {
	for _, l := range servers {
		_ = l.srv.Close() // the failure being returned is the one that matters
	}
}

// quickStartShoppers are the demo shoppers the quick start prints tokens for.
var quickStartShoppers = []string{"u-1", "u-2", "u-3"}

type demoShopper struct{ sub, token string }

// quickStart is what the embedded mode prints.
type quickStart struct {
	url, adminToken string
	shoppers        []demoShopper // none with auth.shopper none
	mint            string        // the command minting more tokens; "" unless the secret was generated
	demo            service.SKU
}

// mintCommand is the `seckill token` command line that mints tokens this
// instance accepts: its generated secret, and any issuer or audience that
// is not the default.
func mintCommand(j config.JWT) string {
	var b strings.Builder
	fmt.Fprintf(&b, "SECKILL_AUTH_JWT_SECRET=%s", j.Secret) // hex: nothing to quote
	def := config.Default().Auth.JWT
	if j.Issuer != def.Issuer {
		fmt.Fprintf(&b, " SECKILL_AUTH_JWT_ISSUER=%s", shellQuote(j.Issuer))
	}
	if j.Audience != def.Audience {
		fmt.Fprintf(&b, " SECKILL_AUTH_JWT_AUDIENCE=%s", shellQuote(j.Audience))
	}
	b.WriteString(" go run ./cmd/seckill token -sub u-4")
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func printQuickStart(w io.Writer, q quickStart) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nseckill is running at %s (embedded mode: in-process Redis and SQLite, discarded at exit)\n", q.url)
	fmt.Fprintf(&b, "  admin token: %s\n", q.adminToken)
	fmt.Fprintf(&b, "  demo SKU:    id %d, %q, %d units, %d per user\n\n", q.demo.ID, q.demo.Name, q.demo.Stock, q.demo.PerUserLimit)
	buy := func(user, auth string) {
		fmt.Fprintf(&b, "  curl -s -X POST %s/api/v1/orders%s -H 'Content-Type: application/json' -d '{\"sku_id\":%d,\"user_id\":\"%s\",\"quantity\":1}'\n", q.url, auth, q.demo.ID, user)
	}
	if len(q.shoppers) == 0 {
		b.WriteString("Buy one (auth.shopper none: any user_id):\n")
		buy("u-1", "")
	}
	for _, s := range q.shoppers {
		fmt.Fprintf(&b, "Buy one as %s (shopper token valid %s):\n", s.sub, QuickStartTokenTTL)
		buy(s.sub, " -H 'Authorization: Bearer "+s.token+"'")
	}
	if q.mint != "" {
		b.WriteString("\nMint a token for another shopper (this instance's throwaway HS256 secret, gone at exit):\n")
		fmt.Fprintf(&b, "  %s\n", q.mint)
	}
	fmt.Fprintf(&b, "\nSee the stock as an admin:\n  curl -s %s/admin/v1/skus/%d -H 'Authorization: Bearer %s'\n\n", q.url, q.demo.ID, q.adminToken)
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
	mountPprof(mux)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen debug %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("pprof", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return srv.Close, nil
}

func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
