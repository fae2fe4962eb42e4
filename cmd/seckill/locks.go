package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/config"
)

const locksUsage = `Usage: seckill locks [-json] [-limit 10000] [-config file.yaml]

Prints the SKU locks that have a holder, as the lock backend of this
configuration (serve's) knows them: what GET /admin/v1/skus/{id}/lock
answers, for every held one. Never takes or extends a lease.

  -json        print a JSON array, as the admin API answers each lock
  -limit N     look at most at this many lock keys (default 10000)
`

type locksFlags struct {
	json  bool
	limit int
}

// parseLocks reads the locks command's flags, -config among them. It
// returns flag.ErrHelp for -h.
func parseLocks(args []string, path *string) (locksFlags, error) {
	fs := flag.NewFlagSet("seckill locks", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(path, "config", *path, "")
	f := locksFlags{}
	fs.BoolVar(&f.json, "json", false, "")
	fs.IntVar(&f.limit, "limit", 10000, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, fmt.Errorf("locks: %w (see seckill locks -h)", err)
	}
	if fs.NArg() != 0 || f.limit < 1 {
		return f, errors.New("usage: seckill locks [-json] [-limit 10000] (see seckill locks -h)")
	}
	return f, nil
}

// locks prints the SKU locks that have a holder (see locksUsage).
func locks(ctx context.Context, f locksFlags, cfg config.Config, log *slog.Logger, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	held, err := app.HeldLocks(ctx, cfg, log, f.limit)
	if err != nil {
		return fmt.Errorf("locks: %w", err)
	}
	views := make([]handler.LockJSON, len(held))
	for i, h := range held {
		views[i] = handler.NewLockJSON(h.SKU, h.State)
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(views)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SKU\tOWNER\tTOKEN\tFENCE\tLEASE LEFT\tHELD SINCE\tRENEWED\tWANTED\tWAITERS\tQUEUED")
	for _, v := range views {
		since := "-"
		if v.HeldSince != nil {
			since = v.HeldSince.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%t\t%t\t%d\t%d\n", v.SKUID, v.Owner, v.Token, v.Fence,
			time.Duration(v.LeaseLeftMS)*time.Millisecond, since, v.Renewed, v.Wanted, v.Waiters, v.Queued)
	}
	return tw.Flush()
}
