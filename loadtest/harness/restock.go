package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// restockUnits is how many units each restock sets: a quarter of the
// initial stock, at least one.
func (c Config) restockUnits() int64 { return max(1, c.Stock/4) }

// restockLoop restocks the SKU Config.Restocks times during the sale, each
// time the sale has sold out, through the instances in turn, and records
// each restock as an operation of the history: a sold-out mark must
// follow a restock made through another instance within the bound.
func (r *run) restockLoop(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for done := 0; done < r.cfg.Restocks; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		stock, _, err := r.stockReading(pctx)
		cancel()
		if err != nil || stock != 0 {
			continue
		}
		if err := r.restock(ctx, done); err != nil {
			r.event("restock %d failed: %v", done+1, err)
			continue
		}
		done++
	}
}

// restock sets the remaining stock through instance i mod N and records
// the operation with the total_stock it left.
func (r *run) restock(ctx context.Context, i int) error {
	inst := i % len(r.baseURLs)
	units := r.cfg.restockUnits()
	body, _ := json.Marshal(map[string]int64{"stock": units})
	var out struct {
		Stock int64 `json:"stock"`
		Sold  int64 `json:"sold"`
	}
	call := time.Now()
	err := r.admin(ctx, http.MethodPut, fmt.Sprintf("%s/admin/v1/skus/%d/stock", r.baseURLs[inst], r.skuID), body, http.StatusOK, &out)
	ret := time.Now()
	if err != nil {
		r.restocks.fail()
		return err
	}
	r.restocks.add(verify.Op{Kind: verify.Restock, Stock: units, Instance: fmt.Sprintf("instance-%d", inst),
		Call: call, Return: ret, Status: http.StatusOK}, out.Sold+out.Stock) // a restock makes total_stock sold + stock
	r.event("restock %d: stock set to %d through instance-%d (total stock now %d)", i+1, units, inst, out.Sold+out.Stock)
	return nil
}
