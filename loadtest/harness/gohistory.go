package harness

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// expirySlack is how long after an expired order's settled_at (the
// sweeper's clock, read before its transaction) its units are taken to
// be back: the sweep's transaction commits within it.
const expirySlack = time.Second

// goHistory records the answers of buyers driven from Go (not k6) as
// operations of the history check, and the cancels that return units.
type goHistory struct {
	mu      sync.Mutex
	ops     []verify.Op
	unknown map[string]verify.Op // user → an order request with no answer
	cancels map[int64]verify.Op  // order id → its cancel's interval
}

func newGoHistory() *goHistory {
	return &goHistory{unknown: map[string]verify.Op{}, cancels: map[int64]verify.Op{}}
}

// order records one order request of user (quantity 1) and its answer:
// err, or status with the error code and the order id it named.
func (g *goHistory) order(client int, instance, user string, call, ret time.Time, status int, code string, orderID int64, err error) {
	op := verify.Op{User: user, Qty: 1, Instance: instance, Client: client, Call: call, Return: ret, Status: status, OrderID: orderID}
	switch {
	case err != nil || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		op.Status = 0
		if err == nil {
			op.Status = status
		}
		g.mu.Lock()
		g.unknown[user] = op
		g.mu.Unlock()
		return
	case status == http.StatusCreated:
		op.Kind = verify.Bought
	case status == http.StatusConflict && code == verify.SoldOutAnswer:
		op.Kind = verify.SoldOutAnswer
	case status == http.StatusConflict && code == verify.LimitAnswer:
		op.Kind = verify.LimitAnswer
	default:
		return // touches no stock
	}
	g.mu.Lock()
	g.ops = append(g.ops, op)
	g.mu.Unlock()
}

// cancel records the interval of a cancel of order id (200 or unknown).
func (g *goHistory) cancel(id int64, user, instance string, call, ret time.Time, status int) {
	g.mu.Lock()
	g.cancels[id] = verify.Op{Kind: verify.Returned, User: user, Qty: 1, OrderID: id, Instance: instance, Call: call, Return: ret, Status: status}
	g.mu.Unlock()
}

// restock records a restock the scenario made, as an operation.
func (g *goHistory) restock(op verify.Op) {
	g.mu.Lock()
	g.ops = append(g.ops, op)
	g.mu.Unlock()
}

// settledOrder is an order as the history needs it.
type settledOrder struct {
	id, qty      int64
	user, status string
	settled      *time.Time
}

// build completes the history from the settled orders of sku: an
// unanswered request whose buyer has an order bought at some time after
// it was sent; every cancelled order returned its units within its
// cancel's interval (the end of the history when the cancel went
// unanswered), every expired one within expirySlack of its settled_at.
func (g *goHistory) build(ctx context.Context, db *sql.DB, sku, initial, limit int64) (verify.History, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := verify.History{InitialStock: initial, PerUserLimit: limit, Ops: append([]verify.Op(nil), g.ops...)}
	orders, err := readOrders(ctx, db, sku)
	if err != nil {
		return h, err
	}
	end := g.end(orders)
	g.resolve(&h, orders, end)
	for _, o := range orders {
		ret, ok, err := g.returned(o, end)
		if err != nil {
			return h, err
		}
		if ok {
			h.Ops = append(h.Ops, ret)
		}
	}
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Call.Before(h.Ops[j].Call) })
	return h, nil
}

func readOrders(ctx context.Context, db *sql.DB, sku int64) ([]settledOrder, error) {
	rows, err := db.QueryContext(ctx, "SELECT id, user_id, quantity, status, settled_at FROM orders WHERE sku_id = ?", sku)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var orders []settledOrder
	for rows.Next() {
		var o settledOrder
		if err := rows.Scan(&o.id, &o.user, &o.qty, &o.status, &o.settled); err != nil {
			return nil, err
		}
		orders = append(orders, o)
	}
	return orders, rows.Err()
}

// end is just after the last moment the history knows of.
func (g *goHistory) end(orders []settledOrder) time.Time {
	var end time.Time
	for _, op := range g.ops {
		end = maxTime(end, op.Return)
	}
	for _, op := range g.cancels {
		end = maxTime(end, op.Return)
	}
	for _, o := range orders {
		if o.settled != nil {
			end = maxTime(end, o.settled.Add(expirySlack))
		}
	}
	return end.Add(time.Millisecond)
}

// resolve decides the unanswered requests: one whose buyer has an order
// no answer named bought it, answered at the end; the others did nothing.
func (g *goHistory) resolve(h *verify.History, orders []settledOrder, end time.Time) {
	answered := map[int64]verify.Op{}
	for _, op := range h.Ops {
		if op.Kind == verify.Bought {
			answered[op.OrderID] = op
		}
	}
	h.Resolution.Unknown = len(g.unknown)
	byUser := map[string]settledOrder{}
	for _, o := range orders {
		byUser[o.user] = o
	}
	for user, op := range g.unknown {
		o, ok := byUser[user]
		if !ok || answered[o.id].Kind != "" {
			h.Resolution.Dropped++
			continue
		}
		op.Kind, op.Return, op.Resolved, op.OrderID = verify.Bought, end, true, o.id
		h.Resolution.Happened++
		h.Ops = append(h.Ops, op)
	}
}

// returned is the operation that gave a cancelled or expired order's
// units back; ok is false for an order that kept them.
func (g *goHistory) returned(o settledOrder, end time.Time) (ret verify.Op, ok bool, err error) {
	ret = verify.Op{Kind: verify.Returned, User: o.user, Qty: o.qty, OrderID: o.id}
	switch o.status {
	case "cancelled":
		c, ok := g.cancels[o.id]
		if !ok {
			return ret, false, fmt.Errorf("order %d is cancelled, yet no cancel of it was sent", o.id)
		}
		ret = c
		if c.Status != http.StatusOK {
			ret.Return = end
		}
	case "expired":
		if o.settled == nil {
			return ret, false, fmt.Errorf("order %d expired without settled_at", o.id)
		}
		ret.Call, ret.Return, ret.Instance = *o.settled, o.settled.Add(expirySlack), "sweeper"
	default:
		return ret, false, nil
	}
	return ret, true, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// checkGoHistory builds and checks the history of sku (see goHistory)
// with the run's sold-out bound, writing it as history.jsonl and a
// violating one as history.html in the results directory.
func (r *run) checkGoHistory(ctx context.Context, g *goHistory, sku, initial, limit, final int64) (verify.HistoryVerdict, error) {
	h, err := g.build(ctx, r.db, sku, initial, limit)
	if err != nil {
		return verify.HistoryVerdict{}, fmt.Errorf("history: %w", err)
	}
	if err := writeHistory(filepath.Join(r.dir, "history.jsonl"), h); err != nil {
		return verify.HistoryVerdict{}, fmt.Errorf("history: %w", err)
	}
	v := verify.CheckHistory(h, verify.HistoryOptions{
		SoldOutBound:  r.cfg.SoldOutBound,
		MaxOps:        r.cfg.HistoryMaxOps,
		Timeout:       2 * time.Minute,
		FinalStock:    final,
		Visualization: filepath.Join(r.dir, historyFile),
	})
	if v.Visualization != "" {
		v.Visualization = historyFile
	}
	return v, nil
}

// historyViolations are a history verdict's violations as a scenario
// lists them.
func historyViolations(v verify.HistoryVerdict) []string {
	var out []string
	for _, x := range v.Violations {
		out = append(out, "history: "+x.Message)
	}
	return out
}
