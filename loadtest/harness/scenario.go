package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// scenarioConfig is what a scenario driven from Go (invented-skus,
// lifecycle, idle-restock, fair) runs on: cfg's instances, database,
// binary, sold-out bound and Keep, with env for every instance.
func scenarioConfig(cfg Config, env ...string) (Config, error) {
	return normalize(Config{Instances: cfg.Instances, MySQLDSN: cfg.MySQLDSN, ServiceBin: cfg.ServiceBin,
		Keep: cfg.Keep, Log: cfg.Log, SoldOutBound: cfg.SoldOutBound, Env: env})
}

// startScenario brings up a scenario's run: its results and work
// directories, its database, a private Redis and the instances, reached
// by a client that keeps up to conns idle connections to each (0: Go's
// default). The caller defers tearDown at once, whatever the error:
// what was started is stopped.
func startScenario(ctx context.Context, cfg Config, name string, conns int) (*run, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	if conns > 0 {
		client.Transport = &http.Transport{MaxIdleConnsPerHost: conns}
	}
	r, err := newRun(cfg, time.Now().Format("20060102-150405")+"-"+name, client)
	if err != nil {
		return r, err
	}
	return r, r.bringUp(ctx)
}

// writeVerdict ends a scenario's text: PASS, or each violation.
func writeVerdict(w io.Writer, violations []string) {
	if len(violations) == 0 {
		fmt.Fprintln(w, "PASS")
		return
	}
	for _, v := range violations {
		fmt.Fprintln(w, "FAIL:", v)
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
