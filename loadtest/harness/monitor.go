package harness

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// monitorState is what watch saw. It is written by watch's goroutine and
// read after it has returned.
type monitorState struct {
	firstSold  time.Time // first poll that saw sold > 0
	soldOut    time.Time // first poll that saw stock == 0
	faultStart time.Time // victim killed
	faultBack  time.Time // victim restarted and answering
	faultSold  int64     // units sold when the fault struck
	victims    string    // what the fault killed
	faultErr   error
	outage     BrokerOutage // -fault broker
	samples    []sample
}

type sample struct {
	At   float64 `json:"t"` // seconds since k6 started
	Sold int64   `json:"sold"`
}

// stockReading reads the SKU's stock and sold: from the database when the
// run owns it, else from the admin API.
func (r *run) stockReading(ctx context.Context) (stock, sold int64, err error) {
	if r.db != nil {
		// With several SKUs, their sums (not those of the mysql-failover
		// fault's writes).
		err = r.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(stock), 0), COALESCE(SUM(sold), 0) FROM skus WHERE id IN ("+r.skuList()+")").Scan(&stock, &sold)
		return stock, sold, err
	}
	var out struct {
		Stock int64 `json:"stock"`
		Sold  int64 `json:"sold"`
	}
	for _, base := range r.baseURLs {
		if err = r.admin(ctx, http.MethodGet, fmt.Sprintf("%s/admin/v1/skus/%d", base, r.skuID), "", http.StatusOK, &out); err == nil {
			return out.Stock, out.Sold, nil
		}
	}
	return 0, 0, err
}

// watch polls the sale every 100ms until ctx ends, noting when it started
// and sold out, and injects the configured fault once FaultAt of the stock
// is sold. It returns only when the victim is back.
func (r *run) watch(ctx context.Context, start time.Time) {
	m := &r.monitor
	threshold := int64(float64(r.cfg.Stock) * r.cfg.FaultAt)
	armed := r.cfg.Fault != FaultNone
	var fault sync.WaitGroup
	defer fault.Wait()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastSample time.Time
	for {
		select {
		case <-ctx.Done():
			if armed {
				m.faultErr = fmt.Errorf("the %s fault was never injected: the sale never reached %d units sold (%.0f%% of the stock)",
					r.cfg.Fault, threshold, r.cfg.FaultAt*100)
			}
			return
		case now := <-tick.C:
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			stock, sold, err := r.stockReading(pctx)
			cancel()
			if err != nil {
				continue
			}
			since := now.Sub(start).Seconds()
			if now.Sub(lastSample) >= 500*time.Millisecond {
				m.samples = append(m.samples, sample{At: since, Sold: sold})
				lastSample = now
			}
			if sold > 0 && m.firstSold.IsZero() {
				m.firstSold = now
				r.event("first unit sold (%.1fs after k6 started)", since)
			}
			if stock == 0 && m.soldOut.IsZero() {
				m.soldOut = now
				r.event("sold out: %d units (%.1fs after k6 started)", sold, since)
			}
			if armed && sold >= threshold {
				armed = false
				if stock == 0 {
					m.faultErr = fmt.Errorf("the sale sold out before the %s fault could strike: raise -stock or lower -fault-at", r.cfg.Fault)
					continue
				}
				m.faultSold, m.outage.Left = sold, stock
				// Restoring the victim must finish even when k6 is done.
				fault.Go(func() { m.faultErr = r.inject(context.WithoutCancel(ctx)) })
			}
		}
	}
}
