package main

import (
	"context"
	"io"

	"github.com/seckill/seckill/loadtest/harness"
)

// runIdleRestock is -scenario idle-restock: sell-outs, idle gaps past the
// sold-out marks' staleness, restocks through one instance and bursts at
// the others, every answer checked as a history.
func runIdleRestock(ctx context.Context, cfg harness.Config, stdout io.Writer) error {
	res, err := harness.RunIdleRestock(ctx, harness.IdleRestockConfig{
		Instances:    cfg.Instances,
		SoldOutBound: cfg.SoldOutBound,
		MySQLDSN:     cfg.MySQLDSN,
		ServiceBin:   cfg.ServiceBin,
		Keep:         cfg.Keep,
		Log:          cfg.Log,
	})
	return report(res, err, stdout)
}
