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

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
)

// locks prints the SKU locks that have a holder, as the lock backend
// (serve's) knows them: what GET /admin/v1/skus/{id}/lock answers, for
// every held one.
func locks(ctx context.Context, args []string, cfg config.Config, log *slog.Logger, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seckill locks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a JSON array, as the admin API answers each lock")
	limit := fs.Int("limit", 10000, "look at most at this many lock keys")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *limit < 1 {
		return errors.New("usage: seckill locks [-json] [-limit 10000]")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	held, err := app.HeldLocks(ctx, cfg, log, *limit)
	if err != nil {
		return fmt.Errorf("locks: %w", err)
	}
	views := make([]handler.LockJSON, len(held))
	for i, h := range held {
		views[i] = handler.NewLockJSON(h.SKU, h.State)
	}
	if *asJSON {
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
