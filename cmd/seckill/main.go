// Command seckill is the flash-sale inventory service.
//
//	seckill [serve]              run the service (the default)
//	seckill migrate up|down|status
//	seckill healthcheck          exit 0 if the running server's /readyz answers 200
//
// With nothing configured it runs the embedded quick start: in-process
// Redis and SQLite, a demo SKU, and a printed curl line. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(1)
	}
}

const usage = `usage: seckill [-config file.yaml] [serve | migrate up|down|status | healthcheck]`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seckill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", getenv("SECKILL_CONFIG"), "YAML config file (env SECKILL_CONFIG)")
	fs.Usage = func() { fmt.Fprintln(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		return err
	}
	format := cfg.Log.Format
	if format == "" {
		format = "json"
		if cfg.Embedded() {
			format = "text"
		}
	}
	log := logging.New(stderr, cfg.Log.Level, format)
	redis.SetLogger(app.RedisLogger(log)) // go-redis has one logger per process

	switch cmd := fs.Args(); {
	case len(cmd) == 0 || (len(cmd) == 1 && cmd[0] == "serve"):
		if err := cfg.ValidateServe(); err != nil {
			return err
		}
		return app.Serve(ctx, cfg, log, stdout, nil)
	case len(cmd) == 2 && cmd[0] == "migrate":
		return app.Migrate(ctx, cfg, cmd[1], log)
	case len(cmd) == 1 && cmd[0] == "healthcheck":
		return healthcheck(ctx, cfg.HTTP.Addr)
	default:
		return errors.New(usage)
	}
}
