// Package app is the composition root: from one config.Config it opens
// the stores, builds the lock, the order flow and the HTTP API, and runs
// them until the context ends. cmd/seckill calls it. Each package's own
// configuration comes from package wiring, which the tests of production
// behaviour call too.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/metrics"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// Serve runs the service until ctx ends, then shuts it down. With no DSN
// it runs embedded: in-process Redis and SQLite, and a demo SKU. ready,
// if not nil, gets the listening address.
func Serve(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer, ready func(addr string)) error {
	return serve(ctx, cfg, log, stdout, ready, nil)
}

// serve is Serve, tracing through tp when it is not nil (a test's
// in-memory exporter) instead of what cfg.Tracing says.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer, ready func(addr string), tp *sdktrace.TracerProvider) error {
	var cl closers
	defer cl.close(log)

	tr, err := openTracing(ctx, cfg.Tracing, tp, log, &cl) // closed last: flushes what the drain traced
	if err != nil {
		return err
	}

	generatedToken := cfg.Admin.Token == ""
	if generatedToken {
		cfg.Admin.Token = randomToken()
	}
	generatedSecret := cfg.Embedded() && cfg.Auth.Shopper == config.ShopperJWT && !cfg.Auth.JWT.KeySet()
	if cfg.Embedded() && cfg.Auth.PaymentTokens == "" {
		cfg.Auth.PaymentTokens = randomToken() // printed, so that the quick start can pay
	}
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
	var confirm engine.Replicas
	if repl != nil && cfg.MySQL.MinReplicas > 0 {
		confirm = repl
	}
	store := newStore(cfg, db, confirm)
	rs, err := openRedis(cfg, &cl)
	if err != nil {
		return err
	}
	lk, marks, board := redisLocking(cfg, rs, mx, &cl)
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
		lk, marks, board, readyz = zkb.locker, zkb.marks, nil, zkReadiness{store: store, zk: zkb}
	}
	skus := service.NewDirectory(store, marks, wiring.DirectoryConfig(cfg), log, mx)
	watch := startWatch(cfg, store, rs, skus, mx, log, &cl)
	seller := newEngine(cfg, store, lk, skus, board, confirm, tr.orders(), mx, log)
	orders := service.NewOrders(store, skus, seller, mx)
	catalog := service.NewCatalog(store, store, skus, log)
	leases := sweeperLock(cfg, rs, lk)
	lifecycle, err := startLifecycle(ctx, cfg, store, leases, skus, mx, log, &cl)
	if err != nil {
		return err
	}
	if err := startEvents(ctx, cfg, store, leases, shoppers.OrderIDs, mx, log, &cl); err != nil {
		return err
	}
	var draining atomic.Bool
	api, operator, err := newAPI(cfg, orders, catalog, readyz, mx, &draining, shoppers, lifecycle, lk, watch, tr.requests(), log)
	if err != nil {
		return err
	}

	return listenAndServe(ctx, cfg, running{api: api, operator: operator, seller: seller, watch: watch, catalog: catalog, draining: &draining,
		redis: rs.describe(), generatedToken: generatedToken, generatedSecret: generatedSecret}, mx, stdout, ready, log, &cl)
}

// closers runs what was opened in reverse order.
type closers []func() error

func (c *closers) add(f func() error) { *c = append(*c, f) }

// close is deferred at the start of Serve: through the pointer it runs
// what was added since, not the empty list of then.
func (c *closers) close(log *slog.Logger) {
	for i := len(*c) - 1; i >= 0; i-- {
		if err := (*c)[i](); err != nil {
			log.Warn("close", "err", err)
		}
	}
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
// independent masters), the shared sold-out marks in Redis and the board
// on which the places of buyers told to come back are shared; none
// without Redis (lock.backend zookeeper).
func redisLocking(cfg config.Config, rs *redisSetup, mx *metrics.Metrics, cl *closers) (lockAdapter, service.SoldOutMarks, engine.PlaceBoard) {
	if len(rs.clients) == 0 {
		return nil, nil, nil
	}
	lockOpts := append(wiring.OrderLockOptions(cfg), lock.WithObserver(mx.Lock()))
	lockOpts = append(lockOpts, lockReplicaOptions(cfg)...)
	lc := rs.lockClient(lockOpts...)
	cl.add(lc.Close) // before the Redis clients close (closers run in reverse)
	marks := locking.NewRedisMarks(rs.marks(), cfg.Lock.Prefix+"soldout:", cfg.SoldOut.SharedTTL)
	return locking.NewRedisLocker(lc), marks, marks
}

// startWatch starts the long-polls of orders: changes heard over Redis
// pub/sub on lock.prefix + "orders" (none without Redis: the recheck
// alone), told of every order a commit through this instance changes.
func startWatch(cfg config.Config, store service.OrderStates, rs *redisSetup, skus *service.Directory, mx *metrics.Metrics, log *slog.Logger, cl *closers) *service.Watch {
	var feed service.OrderFeed
	if len(rs.clients) > 0 {
		feed = locking.NewRedisFeed(rs.marks(), cfg.Lock.Prefix)
	}
	w := service.NewWatch(store, feed, wiring.WatchConfig(cfg), log, mx)
	skus.Tell(w)
	w.Start()
	cl.add(w.Close) // before the Redis clients close (closers run in reverse)
	return w
}

// newEngine builds the order engine on a lock, the SKUs, the board of
// places, the replicas that confirm commits (nil: none), the tracer of
// orders (nil: none) and the queue settings.
func newEngine(cfg config.Config, store engine.Committer, lk engine.Locker, skus engine.SKUs, board engine.PlaceBoard,
	confirm engine.Replicas, tracer engine.Tracer, mx *metrics.Metrics, log *slog.Logger) *engine.Seller {
	ecfg := wiring.EngineConfig(cfg)
	ecfg.Replicas = confirm
	ecfg.Tracer = tracer
	return engine.New(store, lk, skus, board, ecfg, log, mx)
}

// newAPI builds the HTTP handler with its limits and metrics; with
// http.admin_addr, also the operator's (nil without), and the API's
// answers none of the operator's routes.
func newAPI(cfg config.Config, orders handler.Orders, catalog *service.Catalog, ready handler.Readiness, mx *metrics.Metrics, draining *atomic.Bool, shoppers handler.ShopperAuth, lifecycle handler.Lifecycle, locks service.LockInspector, watch *service.Watch, tracer handler.Tracer, log *slog.Logger) (api, operator http.Handler, err error) {
	hc := handler.Config{
		Orders:       orders,
		Catalog:      catalog,
		Ready:        ready,
		AdminToken:   cfg.Admin.Token,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes,
		Log:          log,
		Observer:     mx,
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
		Watch:          watch,
		Tracer:         tracer,
	}
	if cfg.HTTP.AdminAddr != "" {
		return handler.NewSplit(hc)
	}
	api, err = handler.New(hc)
	return api, nil, err
}

// running is what Serve built and now serves.
type running struct {
	api, operator http.Handler   // operator: nil without http.admin_addr
	seller        *engine.Seller // drained at shutdown
	watch         *service.Watch // its long-polls answered at shutdown's start
	catalog       *service.Catalog
	draining      *atomic.Bool
	redis         string // the Redis setup, for the start-up log
	// generatedToken and generatedSecret: the admin token or the HS256
	// secret was made up at start, and is printed once.
	generatedToken, generatedSecret bool
}

// listenAndServe listens on http.addr (and http.admin_addr, http.debug_addr
// when set), announces the service and serves r until ctx ends.
func listenAndServe(ctx context.Context, cfg config.Config, r running, mx *metrics.Metrics, stdout io.Writer, ready func(addr string), log *slog.Logger, cl *closers) error {
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTP.Addr, err)
	}
	if err := announce(ctx, cfg, r.catalog, r.redis, "http://"+ln.Addr().String(), r.generatedToken, r.generatedSecret, stdout, log); err != nil {
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
		if admin, err = listenAdmin(cfg, r.operator, log); err != nil {
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
	return serveUntilDone(ctx, cfg, &listening{newHTTPServer(cfg, r.api, conns, log), ln}, admin, r, ready, log)
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

// serveUntilDone serves the API and admin listeners until ctx ends, then
// drains: the long-polls held are answered at once, /readyz answers 503
// for http.drain_delay, then listeners and order queues shut down within
// http.shutdown_timeout.
func serveUntilDone(ctx context.Context, cfg config.Config, api, admin *listening, r running, ready func(addr string), log *slog.Logger) error {
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

	r.watch.Drain() // a poll held for a minute would outlast the shutdown
	if cfg.HTTP.DrainDelay > 0 {
		r.draining.Store(true)
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
	go func() { defer wg.Done(); errs[len(servers)] = r.seller.Shutdown(sctx) }()
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
