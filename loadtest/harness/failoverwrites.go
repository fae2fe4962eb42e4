package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// The writes of the mysql-failover fault beside k6's orders, on a SKU of
// their own: a buyer orders a unit every writeEvery and, writeDelay after
// the 201, pays it (three in four) or cancels it; the admin sets the
// stock once mid-stall. A write answered 503 or not at all is sent again
// (each is idempotent). Each one answered 200/201 must be on the survivor.
const (
	writeEvery = 50 * time.Millisecond
	writeDelay = 3 * time.Second
	writeTries = 40
	writeSKU   = 1_000_000 // units: never sold out
)

// FailoverWrites counts, by kind, the writes acknowledged and those the
// survivor lacks.
type FailoverWrites struct {
	Orders       WriteCount       `json:"orders"`
	Payments     WriteCount       `json:"payments"`
	Cancels      WriteCount       `json:"cancels"`
	StockChanges WriteCount       `json:"stock_changes"`
	Answers      map[string]int64 `json:"answers"` // by kind and status
}

// WriteCount is one kind's acknowledged writes.
type WriteCount struct {
	Acknowledged int `json:"acknowledged"`
	Missing      int `json:"missing"`
	After        int `json:"after_failover"`
}

func (c WriteCount) String() string {
	return fmt.Sprintf("%d acknowledged (%d after the failover), %d missing", c.Acknowledged, c.After, c.Missing)
}

func (w FailoverWrites) String() string {
	return fmt.Sprintf("payments %s; cancels %s; stock changes %s; orders %s",
		w.Payments, w.Cancels, w.StockChanges, w.Orders)
}

// violations is a missing write, payments that stopped, or a stock change
// never acknowledged.
func (w FailoverWrites) violations() []verify.Violation {
	var out []string
	if n := w.Orders.Missing + w.Payments.Missing + w.Cancels.Missing + w.StockChanges.Missing; n > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged writes not on the survivor: %s", n, w))
	}
	if w.Payments.After == 0 {
		out = append(out, "no payment acknowledged after the failover: "+w.String())
	}
	if w.StockChanges.Acknowledged == 0 {
		out = append(out, fmt.Sprintf("the stock change was never acknowledged (%d tries)", writeTries))
	}
	return violationsOf(AcknowledgedWriteMissing, out...)
}

// failoverWrites is what the fault's clients were told.
type failoverWrites struct {
	sku     int64
	pending sync.WaitGroup // payments, cancels and the restock under way

	mu      sync.Mutex
	orders  map[int64]ordered   // acknowledged: order id → buyer, when
	paid    map[int64]time.Time // acknowledged: order id → when
	cancels map[int64]time.Time
	total   int64 // total_stock the acknowledged restock left, 0: none
	stocked time.Time
	answers map[string]int64
}

type ordered struct {
	user string
	at   time.Time
}

func newFailoverWrites() *failoverWrites {
	return &failoverWrites{orders: map[int64]ordered{}, paid: map[int64]time.Time{},
		cancels: map[int64]time.Time{}, answers: map[string]int64{}}
}

// failoverWrites runs the fault's buyers until ctx ends; their payments
// and cancels, and the restock, are left in pending.
func (r *run) failoverWrites(ctx context.Context) {
	w := r.myfail.writes
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		user := fmt.Sprintf("%s-w%d", r.id, k)
		token, _ := r.shopperToken(user) // HS256 over a generated secret: cannot fail
		base := r.baseURLs[k%len(r.baseURLs)]
		p, err := r.send(ctx, http.MethodPost, base+"/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, w.sku), token, "Idempotency-Key", user)
		w.count("order", p.status, err)
		ref := p.answer().OrderID
		id, ok := r.orderIDs.Decode(ref)
		if err != nil || p.status != http.StatusCreated || !ok {
			continue // an unknown outcome: not followed up, not acknowledged
		}
		w.note(func() { w.orders[id] = ordered{user, time.Now()} })
		w.pending.Go(func() {
			sleepCtx(ctx, writeDelay) // the buyer pays (or cancels) a little later
			path, tok, kind, acked := "/internal/v1/orders/"+ref+"/paid", r.payToken, "pay", w.paid
			if k%4 == 3 {
				path, tok, kind, acked = "/api/v1/orders/"+ref+"/cancel", token, "cancel", w.cancels
			}
			if r.retried(context.WithoutCancel(ctx), kind, k, http.MethodPost, path, tok, "").status == http.StatusOK {
				w.note(func() { acked[id] = time.Now() })
			}
		})
	}
}

// restockDuringStall sets the writes' SKU's stock, retried like the rest,
// once the replicas have stalled for half of FaultFor.
func (r *run) restockDuringStall(ctx context.Context) {
	w := r.myfail.writes
	w.pending.Go(func() {
		sleepCtx(ctx, r.cfg.FaultFor/2)
		body := fmt.Sprintf(`{"stock":%d}`, 2*writeSKU)
		p := r.retried(ctx, "restock", 0, http.MethodPut, fmt.Sprintf("/admin/v1/skus/%d/stock", w.sku), r.token, body)
		var out struct{ Stock, Sold int64 }
		if p.status == http.StatusOK && json.Unmarshal(p.body, &out) == nil {
			// A restock makes total_stock sold + stock; only another changes it.
			w.note(func() { w.total, w.stocked = out.Stock+out.Sold, time.Now() })
		}
	})
}

// retried sends a write through the instances in turn while it is
// answered 503 or not at all, writeTries times at most, and returns the
// last answer.
func (r *run) retried(ctx context.Context, kind string, k int, method, path, token, body string) reply {
	var p reply
	for attempt := range writeTries {
		var err error
		p, err = r.send(ctx, method, r.baseURLs[(k+attempt)%len(r.baseURLs)]+path, body, token)
		r.myfail.writes.count(kind, p.status, err)
		if err == nil && p.status != http.StatusServiceUnavailable {
			return p
		}
		sleepCtx(ctx, 250*time.Millisecond) // the client's back-off
	}
	return p
}

func (w *failoverWrites) note(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

func (w *failoverWrites) count(kind string, status int, err error) {
	key := fmt.Sprintf("%s %d", kind, status)
	if err != nil {
		key = kind + " dropped"
	}
	w.note(func() { w.answers[key]++ })
}

// checkFailoverWrites counts, by kind, the acknowledged writes the
// survivor lacks; after is when the address moved. The writes are over.
func (r *run) checkFailoverWrites(ctx context.Context, after time.Time) (FailoverWrites, error) {
	w := r.myfail.writes
	out := FailoverWrites{Answers: w.answers}
	snap, err := verify.FromDB(ctx, r.db, w.sku)
	if err != nil {
		return out, err
	}
	type order struct{ user, status string }
	have := map[int64]order{}
	for _, o := range snap.Orders {
		have[o.ID] = order{o.UserID, o.Status}
	}
	for id, o := range w.orders {
		tally(&out.Orders, have[id].user == o.user, o.at, after)
	}
	// A lost order's id may be given again to another buyer: a payment or
	// cancel is there only on its own buyer's order.
	for id, at := range w.paid {
		tally(&out.Payments, have[id] == order{w.orders[id].user, "paid"}, at, after)
	}
	for id, at := range w.cancels {
		tally(&out.Cancels, have[id] == order{w.orders[id].user, "cancelled"}, at, after)
	}
	if w.total != 0 {
		tally(&out.StockChanges, snap.SKU.TotalStock == w.total, w.stocked, after)
	}
	return out, nil
}

// tally counts one acknowledged write.
func tally(c *WriteCount, there bool, at, after time.Time) {
	c.Acknowledged++
	if !there {
		c.Missing++
	}
	if at.After(after) {
		c.After++
	}
}
