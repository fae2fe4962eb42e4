package main

import (
	"context"
	"io"

	"github.com/seckill/seckill/loadtest/harness"
)

// runInvented is -scenario invented-skus: orders for SKU ids that do not exist.
func runInvented(ctx context.Context, cfg harness.Config, requests int, stdout io.Writer) error {
	res, err := harness.RunInvented(ctx, harness.InventedConfig{
		Instances:  cfg.Instances,
		Requests:   requests,
		MySQLDSN:   cfg.MySQLDSN,
		ServiceBin: cfg.ServiceBin,
		Keep:       cfg.Keep,
		Log:        cfg.Log,
	})
	return report(res, err, stdout)
}

// scenarioResult is what a scenario other than the k6 sale reports.
type scenarioResult interface {
	WriteText(io.Writer)
	Pass() bool
}

// report prints a scenario's result and fails the run when it did not pass.
func report(res scenarioResult, err error, stdout io.Writer) error {
	if err != nil {
		return err
	}
	res.WriteText(stdout)
	if !res.Pass() {
		return errViolated
	}
	return nil
}
