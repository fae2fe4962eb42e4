// Command compare serves one of the order designs `make bench` measures
// the service against (package bench/compare) on the service's schema,
// configured by the service's own settings (SECKILL_MYSQL_DSN, the pool,
// SECKILL_REDIS_ADDRS, the lock, the order timeouts, the shopper auth,
// SECKILL_HTTP_ADDR, SECKILL_DEBUG_ADDR), until SIGINT or SIGTERM.
//
//	SECKILL_MYSQL_DSN=... SECKILL_REDIS_ADDRS=127.0.0.1:6379 go run ./bench/cmd/compare -design conditional
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/bench/compare"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/wiring"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	design := fs.String("design", "", fmt.Sprintf("the design to serve: one of %v", compare.Designs))
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load("", os.Getenv)
	if err != nil {
		return err
	}
	if cfg.Embedded() {
		return errors.New("SECKILL_MYSQL_DSN is required: the designs run on the service's MySQL schema")
	}
	db, err := compare.Open(cfg.MySQL.DSN, cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns, cfg.Order.RequestTimeout)
	if err != nil {
		return err
	}
	defer db.Close()
	var locks func() *lock.Client
	if compare.Design(*design) == compare.PerRequest {
		rdb, err := perRequestRedis(cfg)
		if err != nil {
			return err
		}
		defer rdb.Close()
		opts := wiring.LockOptions(cfg)
		locks = func() *lock.Client { return lock.New(rdb, opts...) }
	}
	orders, err := compare.New(compare.Design(*design), db, locks, compare.Config{
		RequestTimeout: cfg.Order.RequestTimeout,
		LockWait:       cfg.Lock.Wait,
		MaxRetries:     cfg.Order.MaxRetries,
		PaymentTimeout: cfg.Order.PaymentTimeout,
	})
	if err != nil {
		return err
	}
	sc, err := serverConfig(ctx, cfg, db)
	if err != nil {
		return err
	}
	if cfg.HTTP.DebugAddr != "" {
		go servePprof(cfg.HTTP.DebugAddr)
	}
	srv := &http.Server{
		Handler:           compare.Handler(orders, sc),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

// servePprof serves net/http/pprof on addr (the bench's -profile).
func servePprof(addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "compare: pprof:", err)
	}
}

// perRequestRedis is the per-request design's Redis: one address.
func perRequestRedis(cfg config.Config) (*redis.Client, error) {
	if len(cfg.Redis.Addrs) != 1 {
		return nil, errors.New("per-request needs one Redis address (SECKILL_REDIS_ADDRS)")
	}
	return redis.NewClient(&redis.Options{Addr: cfg.Redis.Addrs[0], Username: cfg.Redis.Username, Password: cfg.Redis.Password}), nil
}

// serverConfig is the service's contract as cfg sets it: the admin token,
// the body bound, the shoppers' tokens (auth.shopper jwt) and the order
// ids' encryption.
func serverConfig(ctx context.Context, cfg config.Config, db *sql.DB) (compare.ServerConfig, error) {
	sc := compare.ServerConfig{DB: db, AdminToken: cfg.Admin.Token, MaxBody: cfg.HTTP.MaxBodyBytes}
	if cfg.Auth.Shopper == config.ShopperJWT {
		v, err := auth.New(ctx, app.VerifierConfig(cfg.Auth.JWT), nil)
		if err != nil {
			return sc, err
		}
		sc.Shoppers = v
	}
	if cfg.Auth.OrderIDKey != "" {
		key, err := orderid.ParseKey(cfg.Auth.OrderIDKey)
		if err != nil {
			return sc, err
		}
		if sc.OrderIDs, err = orderid.New(key); err != nil {
			return sc, err
		}
	}
	return sc, nil
}
