package main

import (
	"context"
	"io"

	"github.com/seckill/seckill/loadtest/harness"
)

// runFair is -scenario fair: buyers arrive evenly over the instances, those
// told to come back retry with the same key, and the run counts who was
// served out of arrival order.
func runFair(ctx context.Context, cfg harness.Config, buyers int, stdout io.Writer) error {
	res, err := harness.RunFair(ctx, harness.FairConfig{
		Instances:    cfg.Instances,
		Units:        cfg.Stock,
		Buyers:       buyers,
		Env:          cfg.Env,
		MySQLDSN:     cfg.MySQLDSN,
		ServiceBin:   cfg.ServiceBin,
		SoldOutBound: cfg.SoldOutBound,
		Keep:         cfg.Keep,
		Log:          cfg.Log,
	})
	return report(res, err, stdout)
}
