package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// DefaultClusterSKUs is how many SKUs a sale on Redis Cluster spreads its
// stock over: the killed master's slots are a part of the sale, not all.
const DefaultClusterSKUs = 100

// skuStock is the initial stock of the sale's i-th SKU: Stock spread
// evenly, the first ones taking the remainder.
func (c Config) skuStock(i int) int64 {
	n := int64(c.SKUs)
	s := c.Stock / n
	if int64(i) < c.Stock%n {
		s++
	}
	return s
}

// createSKUs creates the sale's SKUs through the admin API.
func (r *run) createSKUs(ctx context.Context) error {
	for i := range r.cfg.SKUs {
		id, err := r.createSKU(ctx, "loadtest "+r.id, r.cfg.skuStock(i), r.cfg.PerUserLimit)
		if err != nil {
			return err
		}
		r.skuIDs = append(r.skuIDs, id)
	}
	r.skuID = r.skuIDs[0]
	return nil
}

// skuList is the SKU ids as sale.js takes them (SKU_IDS).
func (r *run) skuList() string {
	ids := make([]string, len(r.skuIDs))
	for i, id := range r.skuIDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(ids, ",")
}

// bySKU splits records by the SKU their buyer names ("<run>-s<sku>-...",
// sale.js); a buyer naming no SKU of the sale could hide a lost order.
func bySKU[T any](r *run, records []T, user func(T) string) (map[int64][]T, error) {
	out := make(map[int64][]T, len(r.skuIDs))
	for _, x := range records {
		id := r.skuIDs[0]
		if len(r.skuIDs) > 1 {
			_, rest, _ := strings.Cut(user(x), "-s")
			num, _, _ := strings.Cut(rest, "-")
			var err error
			if id, err = strconv.ParseInt(num, 10, 64); err != nil || !slices.Contains(r.skuIDs, id) {
				return nil, fmt.Errorf("the clients' record: buyer %q names no SKU of the sale", user(x))
			}
		}
		out[id] = append(out[id], x)
	}
	return out, nil
}

// splitClients splits the clients' record by SKU (see bySKU).
func (r *run) splitClients(c verify.Clients) (map[int64]*verify.Clients, error) {
	acks, err1 := bySKU(r, c.Acknowledged, func(a verify.Ack) string { return a.UserID })
	unsure, err2 := bySKU(r, c.Unsure, func(u string) string { return u })
	refused, err3 := bySKU(r, c.Refused, func(f verify.Refusal) string { return f.UserID })
	out := make(map[int64]*verify.Clients, len(r.skuIDs))
	for _, id := range r.skuIDs {
		out[id] = &verify.Clients{Acknowledged: acks[id], Unsure: unsure[id], Refused: refused[id]}
	}
	return out, errors.Join(err1, err2, err3)
}

// skuCheck is what the verifier found for one SKU.
type skuCheck struct {
	db, api       verify.Snapshot
	dbRep, apiRep *verify.Report
	history       verify.HistoryVerdict
	violations    []verify.Violation
}

// SKUVerdict is one SKU's line of a many-SKU sale's summary.
type SKUVerdict struct {
	ID      int64  `json:"id"`
	Stock   int64  `json:"initial_stock"`
	Sold    int64  `json:"sold"`
	Left    int64  `json:"stock_left"`
	Orders  int64  `json:"orders"`
	History string `json:"history"`
	OK      bool   `json:"ok"`
}

// checkSKU verifies one SKU: the database against the clients' record,
// the API against the database, every answer as a history.
func (r *run) checkSKU(ctx context.Context, id, stock int64, clients *verify.Clients, attempts []verify.Attempt) (skuCheck, error) {
	var c skuCheck
	// Restocks (one SKU only) raise what the sale had to sell in all.
	want := verify.Expect{InitialStock: r.restocks.totalStock(stock), SoldOut: r.cfg.ExpectSoldOut, Clients: clients}
	var err error
	if r.db != nil {
		vctx, cancel := context.WithTimeout(ctx, time.Minute)
		c.db, err = verify.FromDB(vctx, r.db, id)
		cancel()
		if err != nil {
			return c, err
		}
		rep := verify.Check(c.db, want)
		c.dbRep = &rep
		c.violations = append(c.violations, rep.Violations...)
	}
	vctx, cancel := context.WithTimeout(ctx, time.Minute)
	c.api, err = verify.FromAPI(vctx, func(ctx context.Context, url string, v any) error {
		return r.admin(ctx, http.MethodGet, url, "", http.StatusOK, v)
	}, r.baseURLs[0], id)
	cancel()
	if err != nil {
		return c, err
	}
	apiWant := want
	if r.db != nil {
		apiWant.Clients = nil // checked once, on the database
	}
	rep := verify.Check(c.api, apiWant)
	c.apiRep = &rep
	histSnap := c.api
	if r.db != nil {
		// The API's own findings are news only where it disagrees.
		c.violations = append(c.violations, verify.Compare(c.db, c.api)...)
		histSnap = c.db
	} else {
		c.violations = append(c.violations, rep.Violations...)
	}
	c.history, err = r.checkHistory(attempts, histSnap, stock)
	if err != nil {
		return c, err
	}
	for _, v := range c.history.Violations {
		if len(r.skuIDs) > 1 { // the history's messages do not name the SKU
			v.Message = fmt.Sprintf("sku %d: %s", id, v.Message)
		}
		c.violations = append(c.violations, v)
	}
	return c, nil
}

// checkSKUs verifies every SKU of the sale and fills the summary: one
// SKU's reports as they are; many SKUs' sums and a verdict each.
func (r *run) checkSKUs(ctx context.Context, s *Summary, cons consoleLog) error {
	byAttempts, err := bySKU(r, cons.Attempts, func(a verify.Attempt) string { return a.User })
	if err != nil {
		return err
	}
	byClients, err := r.splitClients(cons.Clients)
	if err != nil {
		return err
	}
	var db, api verify.Report
	var hist verify.HistoryVerdict
	var all verify.Snapshot // every SKU's orders: the selling window
	passed := 0
	for i, id := range r.skuIDs {
		stock := r.cfg.skuStock(i)
		c, err := r.checkSKU(ctx, id, stock, byClients[id], byAttempts[id])
		if err != nil {
			return fmt.Errorf("sku %d: %w", id, err)
		}
		s.Violations = append(s.Violations, c.violations...)
		all.Orders = append(all.Orders, c.api.Orders...)
		if len(r.skuIDs) == 1 { // its reports as they are
			s.Database, s.API, s.History = c.dbRep, c.apiRep, &c.history
			break
		}
		if c.dbRep != nil {
			addReport(&db, *c.dbRep)
		}
		addReport(&api, *c.apiRep)
		addHistory(&hist, c.history)
		if c.history.Pass() {
			passed++
		}
		s.SKUs = append(s.SKUs, SKUVerdict{ID: id, Stock: stock, Sold: c.apiRep.SKU.Sold, Left: c.apiRep.SKU.Stock,
			Orders: c.apiRep.Orders, History: c.history.Result, OK: len(c.violations) == 0})
	}
	s.SellingWindow = round(all.SellingWindow().Seconds(), 2)
	if len(r.skuIDs) == 1 {
		return nil
	}
	if r.db != nil {
		db.Source = "database"
		s.Database = &db
	}
	api.Source = "api"
	s.API = &api
	hist.Result = verify.Linearizable
	if passed < len(r.skuIDs) {
		hist.Result = verify.NotLinear
	}
	hist.Reason = fmt.Sprintf("checked per SKU: %d of %d linearizable", passed, len(r.skuIDs))
	s.History = &hist
	return nil
}

// addReport adds one SKU's report to the sale's sums (the largest holding
// is the largest of any SKU).
func addReport(sum *verify.Report, rep verify.Report) {
	sum.SKU.TotalStock += rep.SKU.TotalStock
	sum.SKU.Stock += rep.SKU.Stock
	sum.SKU.Sold += rep.SKU.Sold
	sum.SKU.PerUserLimit = rep.SKU.PerUserLimit
	sum.Orders += rep.Orders
	sum.Units += rep.Units
	sum.Users += rep.Users
	sum.MaxPerUser = max(sum.MaxPerUser, rep.MaxPerUser)
	sum.Lost += rep.Lost
}

// addHistory adds one SKU's history verdict to the sale's sums.
func addHistory(sum *verify.HistoryVerdict, v verify.HistoryVerdict) {
	sum.Ops += v.Ops
	sum.Bought += v.Bought
	sum.SoldOut += v.SoldOut
	sum.LimitExceeded += v.LimitExceeded
	sum.Restocks += v.Restocks
	sum.Settled += v.Settled
	sum.Dominated += v.Dominated
	sum.Resolution.Unknown += v.Resolution.Unknown
	sum.Resolution.Happened += v.Resolution.Happened
	sum.Resolution.Dropped += v.Resolution.Dropped
	sum.Resolution.Undecided += v.Resolution.Undecided
	sum.BoundMS = v.BoundMS
	sum.Took += v.Took
	for _, w := range v.Witnesses {
		if len(sum.Witnesses) < 5 {
			sum.Witnesses = append(sum.Witnesses, w)
		}
	}
}

// skuLine sums up the per-SKU verdicts in one line.
func skuLine(skus []SKUVerdict) string {
	var ok, soldOut, linear int
	minStock, maxStock := skus[0].Stock, skus[0].Stock
	for _, v := range skus {
		if v.OK {
			ok++
		}
		if v.Left == 0 && v.Sold == v.Stock {
			soldOut++
		}
		if v.History == verify.Linearizable {
			linear++
		}
		minStock, maxStock = min(minStock, v.Stock), max(maxStock, v.Stock)
	}
	return fmt.Sprintf("%d SKUs of %d–%d units: %d sold exactly their stock, %d linearizable, %d with every check passed",
		len(skus), minStock, maxStock, soldOut, linear, ok)
}

// ClusterSale is the default sale of -redis cluster: DefaultClusterSKUs
// SKUs of 50 units at up to 350 orders/s, each selling a few orders per
// transaction, so that no buyer queues past its deadline.
func ClusterSale() Config {
	c := Default()
	c.SKUs = DefaultClusterSKUs
	c.Stock, c.StartRate, c.Rate, c.Ramp, c.Hold, c.MaxVUs = 5000, 50, 350, 10*time.Second, 30*time.Second, 1000
	return c
}
