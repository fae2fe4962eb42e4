package main

import (
	"context"
	"io"

	"github.com/seckill/seckill/loadtest/harness"
)

// runLifecycle is -scenario lifecycle: the order lifecycle run.
func runLifecycle(ctx context.Context, cfg harness.Config, units int64, stdout io.Writer) error {
	res, err := harness.RunLifecycle(ctx, harness.LifecycleConfig{
		Instances:  cfg.Instances,
		Units:      units,
		MySQLDSN:   cfg.MySQLDSN,
		ServiceBin: cfg.ServiceBin,
		Keep:       cfg.Keep,
		Log:        cfg.Log,
	})
	return report(res, err, stdout)
}
