// Command seckill is the flash-sale inventory service.
//
//	seckill [serve]              run the service (the default)
//	seckill migrate up|down|status
//	seckill healthcheck          exit 0 if the running server's /readyz answers 200
//	seckill token -sub u-1       print a shopper token (HS256, auth.jwt.secret) for tests
//	seckill audit [-sku N] [-json]  reconcile the sale's data; exit 1 naming each broken invariant
//	seckill version              print the module version and the VCS revision
//
// With nothing configured it runs the embedded quick start: in-process
// Redis and SQLite, a demo SKU, and a printed curl line. See README.md.
//
// Licensed under the MIT License (LICENSE at the repository's root).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(exitCode(err))
	}
}

var usage = `seckill: the flash-sale inventory service.

Usage:
  seckill [flags] [command] [flags]

Commands:
  serve                  run the service (the default); with nothing configured,
                         the embedded quick start (in-process Redis and SQLite)
  migrate up             apply the pending schema migrations (needs SECKILL_MYSQL_DSN)
  migrate down           roll back the latest migration
  migrate status         list the migrations and whether each is applied
  healthcheck            exit 0 if the running server's /readyz answers 200
  locks [-json] [-limit N]
                         print the SKU locks that have a holder (same config as serve)
  token -sub USER [-ttl 1h]
                         print a shopper token (HS256, SECKILL_AUTH_JWT_SECRET) for tests
  audit [-sku N] [-json] reconcile every SKU (or SKU N) with its orders, holdings and
                         idempotency keys (needs SECKILL_MYSQL_DSN, SELECT only); exit 0
                         if all agree, 1 naming each SKU and invariant that does not,
                         2 on a usage or database error (seckill audit -h)
  version                print the module version and the VCS revision it was built from
  help                   this text

Flags (before or after the command):
  -config file.yaml      YAML config file (env SECKILL_CONFIG); configs/seckill.yaml lists every setting
  -h, -help, --help      this text; after a command, that command's usage
  -version, --version    the version command

Settings (each variable overrides its key of the config file; lists are
comma-separated; docs/configuration.md explains them):
  SECKILL_CONFIG
        the config file
` + config.Usage()

// command is what the arguments ask for, flags taken out.
type command struct {
	name  string // serve, migrate, healthcheck, token, version, audit, locks, help
	arg   string // the migrate direction; for help, the command asked about
	token tokenArgs
	audit auditFlags
	locks locksFlags
}

const migrateUsage = "usage: seckill migrate up|down|status"

// commandUsage is each command's own -h (token's, audit's and locks' are
// beside their code).
var commandUsage = map[string]string{
	"serve": `Usage: seckill serve [-config file.yaml]

Runs the service until SIGINT or SIGTERM: the API on http.addr, the
operator's routes on http.admin_addr when set. With no mysql.dsn
(SECKILL_MYSQL_DSN) it runs the embedded quick start: in-process Redis and
SQLite, a demo SKU, and printed curl lines. Every setting: seckill -h.
`,
	"migrate": `Usage: seckill migrate up|down|status [-config file.yaml]

Applies the schema to the database of mysql.dsn (SECKILL_MYSQL_DSN):
  up       apply the pending migrations
  down     roll back the latest migration
  status   list the migrations and whether each is applied
`,
	"healthcheck": `Usage: seckill healthcheck [-config file.yaml]

Exits 0 if the server running with this configuration answers 200 on
GET /readyz at http.addr, 1 otherwise: the container healthcheck.
`,
	"version": `Usage: seckill version

Prints the module version and the VCS revision, time and modified flag the
binary was built from (also: seckill --version).
`,
	"token": tokenUsage,
	"audit": auditUsage,
	"locks": locksUsage,
}

// parseArgs reads flags wherever they stand and checks the command before
// anything loads, so a typo reads as a typo, not a missing setting. The
// caller prints the one error line.
func parseArgs(args []string, getenv func(string) string) (command, string, error) {
	fs := flag.NewFlagSet("seckill", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", getenv("SECKILL_CONFIG"), "YAML config file (env SECKILL_CONFIG)")
	version := fs.Bool("version", false, "the version command")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if len(pos) > 0 && commandUsage[pos[0]] != "" {
					return command{name: "help", arg: pos[0]}, "", nil
				}
				return command{name: "help"}, "", nil
			}
			return command{}, "", fmt.Errorf("%w (see seckill -h)", err)
		}
		if *version {
			return command{name: "version"}, "", nil
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
		if pos[0] == "token" { // its flags are its own
			t, err := parseToken(args)
			if errors.Is(err, flag.ErrHelp) {
				return command{name: "help", arg: "token"}, "", nil
			}
			return command{name: "token", token: t}, *path, err
		}
		if pos[0] == "audit" {
			return parseAudit(args, path)
		}
		if pos[0] == "locks" { // its flags are its own
			l, err := parseLocks(args, path)
			if errors.Is(err, flag.ErrHelp) {
				return command{name: "help", arg: "locks"}, "", nil
			}
			return command{name: "locks", locks: l}, *path, err
		}
	}
	switch {
	case len(pos) == 0 || (len(pos) == 1 && pos[0] == "serve"):
		return command{name: "serve"}, *path, nil
	case len(pos) == 1 && (pos[0] == "help" || pos[0] == "--help"):
		return command{name: "help"}, *path, nil
	case len(pos) == 1 && (pos[0] == "healthcheck" || pos[0] == "version"):
		return command{name: pos[0]}, *path, nil
	case pos[0] == "migrate" && len(pos) == 1:
		return command{}, "", errors.New(migrateUsage)
	case pos[0] == "migrate":
		if len(pos) != 2 || !slices.Contains([]string{"up", "down", "status"}, pos[1]) {
			return command{}, "", fmt.Errorf("migrate %s: want up, down or status (%s)", strings.Join(pos[1:], " "), migrateUsage)
		}
		return command{name: "migrate", arg: pos[1]}, *path, nil
	}
	return command{}, "", fmt.Errorf("unknown command %q: want serve, migrate up|down|status, healthcheck, locks, token, version, audit or help (see seckill -h)", strings.Join(pos, " "))
}

// parseAudit reads the audit's flags, -config among them; its usage
// errors exit 2 (see auditUsage).
func parseAudit(args []string, path *string) (command, string, error) {
	fs := flag.NewFlagSet("seckill audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(path, "config", *path, "YAML config file (env SECKILL_CONFIG)")
	var f auditFlags
	fs.Int64Var(&f.sku, "sku", 0, "audit this SKU only")
	fs.BoolVar(&f.json, "json", false, "print one JSON document")
	fs.StringVar(&f.replica, "replica", "", "compare this replica's books (a DSN) with the primary's, naming the SKUs that differ")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return command{name: "help", arg: "audit"}, "", nil
		}
		return command{}, "", usageError(fmt.Errorf("audit: %w (see seckill audit -h)", err))
	}
	if fs.NArg() != 0 {
		return command{}, "", usageError(fmt.Errorf("audit: unexpected argument %q (see seckill audit -h)", fs.Arg(0)))
	}
	skuSet := false
	fs.Visit(func(fl *flag.Flag) { skuSet = skuSet || fl.Name == "sku" })
	if skuSet && f.sku <= 0 {
		return command{}, "", usageError(fmt.Errorf("audit: -sku %d: want a SKU id", f.sku))
	}
	return command{name: "audit", audit: f}, *path, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd, path, err := parseArgs(args, getenv)
	if err != nil {
		return err
	}
	switch cmd.name {
	case "help":
		text := usage
		if u := commandUsage[cmd.arg]; u != "" {
			text = u
		}
		_, err := fmt.Fprint(stdout, text)
		return err
	case "version":
		return printVersion(stdout)
	}
	cfg, err := config.Load(path, getenv)
	if err != nil {
		if cmd.name == "audit" {
			return usageError(err)
		}
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
	app.SetMySQLLogger(log)               // so has the MySQL driver

	switch cmd.name {
	case "migrate":
		return app.Migrate(ctx, cfg, cmd.arg, stdout)
	case "healthcheck":
		return healthcheck(ctx, cfg.HTTP.Addr)
	case "token":
		return mintToken(cmd.token, cfg, stdout)
	case "audit":
		return runAudit(ctx, cfg, cmd.audit, stdout)
	case "locks":
		return locks(ctx, cmd.locks, cfg, log, stdout)
	}
	if err := cfg.ValidateServe(); err != nil {
		return err
	}
	return app.Serve(ctx, cfg, log, stdout, nil)
}
