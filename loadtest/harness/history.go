package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/loadtest/verify"
)

// DefaultSoldOutBound is the staleness the history check accepts of a
// sold_out answer: the service's documented bound for a sold-out mark to
// follow a restock made elsewhere, sold_out.local_ttl + sold_out.recheck.
var DefaultSoldOutBound = config.Default().SoldOut.LocalTTL + config.Default().SoldOut.Recheck

// historyFile is Porcupine's visualization of a violating history, next to
// summary.html.
const historyFile = "history.html"

// restockLog records the restocks the runner makes during a sale, as
// operations of the history.
type restockLog struct {
	mu     sync.Mutex
	ops    []verify.Op
	total  int64 // total_stock after the last restock, 0 before any
	failed int   // restocks of unknown outcome
}

func (l *restockLog) setTotal(total int64) {
	l.mu.Lock()
	l.total = total
	l.mu.Unlock()
}

func (l *restockLog) failedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

func (l *restockLog) fail() {
	l.mu.Lock()
	l.failed++
	l.mu.Unlock()
}

// totalStock is what the sale had to sell in all: the initial stock, or
// the total_stock the last restock left.
func (l *restockLog) totalStock(initial int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total == 0 {
		return initial
	}
	return l.total
}

func (l *restockLog) add(op verify.Op) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

func (l *restockLog) list() []verify.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]verify.Op(nil), l.ops...)
}

// readHistory reads sale.js's "hist" lines from k6's console output,
// decoding the order ids buyers were told with ids.
func readHistory(path string, ids *orderid.Codec) ([]verify.Attempt, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []verify.Attempt
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		msg := consoleMsg(sc.Text())
		if !strings.HasPrefix(msg, verify.HistoryLinePrefix) {
			continue
		}
		a, err := verify.ParseAttempt(msg)
		if err != nil {
			return nil, err
		}
		a.Instance = "instance-" + a.Instance
		if a.OrderRef != "" {
			id, ok := ids.Decode(a.OrderRef)
			if !ok {
				return nil, fmt.Errorf("%q: not an order id of this service", msg)
			}
			a.OrderID = id
		}
		out = append(out, a)
	}
	return out, sc.Err()
}

// checkHistory checks every recorded answer to one SKU, which started the
// sale with initialStock, against one stock counter (verify.CheckHistory),
// resolving unknown outcomes from snap, the settled state of the SKU. A
// violating history is drawn in the results directory as visualization.
func (r *run) checkHistory(attempts []verify.Attempt, snap verify.Snapshot, initialStock int64, visualization string) (verify.HistoryVerdict, error) {
	h := verify.BuildHistory(initialStock, snap, attempts, r.restocks.list())
	jsonl := "history.jsonl"
	if len(r.skuIDs) > 1 {
		jsonl = fmt.Sprintf("history-%d.jsonl", snap.SKU.ID)
	}
	if err := writeHistory(filepath.Join(r.dir, jsonl), h); err != nil {
		return verify.HistoryVerdict{}, fmt.Errorf("history: %w", err)
	}
	v := verify.CheckHistory(h, verify.HistoryOptions{
		SoldOutBound:  r.cfg.SoldOutBound,
		MaxOps:        r.cfg.HistoryMaxOps,
		Timeout:       2 * time.Minute,
		FinalStock:    snap.SKU.Stock,
		Visualization: filepath.Join(r.dir, visualization),
	})
	if v.Visualization != "" {
		v.Visualization = visualization
	}
	if n := r.restocks.failedCount(); n > 0 && v.Result != verify.NotLinear {
		// A restock that may have been applied is missing from the history.
		v.Result = verify.NotConcluded
		v.Reason = fmt.Sprintf("%d restock(s) of unknown outcome are missing from the history", n)
		v.Violations = append(v.Violations, verify.Violation{Name: verify.HistoryNotConcluded, Message: v.Reason})
	}
	return v, nil
}

// writeHistory keeps the checked history, one operation a line, for a
// second look at a run's answers.
func writeHistory(path string, h verify.History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, op := range h.Ops {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
