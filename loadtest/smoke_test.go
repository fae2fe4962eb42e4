package loadtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/toolchain"
	"github.com/seckill/seckill/loadtest/harness"
)

// testLog sends the runner's progress to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSmoke runs the short flash sale of `make test` against three real
// instances, MariaDB and Redis, and requires the verdict: sold out, no
// oversell, every acknowledged order present, every answer linearizable. -short skips it.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("the smoke load test takes about 30 seconds; -short skips it")
	}
	if _, err := toolchain.FindK6(""); err != nil {
		t.Fatalf("%v (make test installs it)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := harness.Smoke()
	cfg.Name = "smoke-" + time.Now().Format("20060102-150405")
	cfg.Log = testLog{t}
	cfg.MySQLDSN = testenv.MySQLDSN()
	res, err := harness.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("smoke run could not be carried out: %v", err)
	}
	var b strings.Builder
	res.Summary.WriteText(&b, res.Dir)
	t.Log(b.String())
	if !res.Pass() {
		t.Fatalf("smoke run verdict FAIL: %v", res.Summary.Violations)
	}
	s := res.Summary
	if s.Database == nil || s.Database.SKU.Sold != cfg.Stock || s.Database.Orders != cfg.Stock {
		t.Fatalf("smoke run: database %+v; want %d sold in %d orders", s.Database, cfg.Stock, cfg.Stock)
	}
	if s.Acknowledged != int(cfg.Stock) {
		t.Errorf("smoke run: %d orders acknowledged to clients; want %d, one per order", s.Acknowledged, cfg.Stock)
	}
	if h := s.History; h == nil || !h.Pass() || int64(h.Bought) != cfg.Stock || h.SoldOut == 0 {
		t.Errorf("smoke run: history check %v; want every answer linearizable, %d sales and sold_out answers checked", h, cfg.Stock)
	}
	if s.ByStatus["400"] == 0 || s.ByStatus["200"] == 0 {
		t.Errorf("smoke run: statuses %v; want malformed requests (400) and replays (200) exercised", s.ByStatus)
	}
}

// TestSmokeFailover is the smoke sale on Redis behind Sentinel (a master,
// two replicas, three sentinels) with the master SIGKILLed once 30% of the
// stock is sold: Sentinel promotes a replica and the sale must still sell
// exactly its stock with every invariant holding. -short skips it.
func TestSmokeFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("the failover smoke load test takes about 40 seconds; -short skips it")
	}
	if _, err := toolchain.FindK6(""); err != nil {
		t.Fatalf("%v (make test installs it)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := harness.Smoke()
	cfg.Name = "smoke-failover-" + time.Now().Format("20060102-150405")
	cfg.Fault = harness.FaultFailover
	cfg.Log = testLog{t}
	cfg.MySQLDSN = testenv.MySQLDSN()
	res, err := harness.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("failover smoke run could not be carried out: %v", err)
	}
	var b strings.Builder
	res.Summary.WriteText(&b, res.Dir)
	t.Log(b.String())
	if !res.Pass() {
		t.Fatalf("failover smoke run verdict FAIL: %v", res.Summary.Violations)
	}
	if s := res.Summary; s.Database == nil || s.Database.SKU.Sold != cfg.Stock || s.Database.Orders != cfg.Stock {
		t.Fatalf("failover smoke run: database %+v; want %d sold in %d orders", s.Database, cfg.Stock, cfg.Stock)
	}
}
