package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/loadtest/verify"
)

// DefaultSoldOutBound is the staleness the history check accepts of a
// sold_out answer: the service's documented bound for a sold-out mark to
// follow a restock made elsewhere, sold_out.local_ttl + sold_out.recheck.
var DefaultSoldOutBound = config.Default().SoldOut.LocalTTL + config.Default().SoldOut.Recheck

// restockLog is what changed the stock beside the buyers' orders:
// restocks and the orders' returns.
type restockLog struct {
	ops    []verify.Op
	total  int64 // total_stock after the last restock, 0 before any
	failed int   // restocks of unknown outcome
}

// totalStock is what the sale had to sell in all: the initial stock, or
// the total_stock the last restock left.
func (l *restockLog) totalStock(initial int64) int64 {
	if l.total == 0 {
		return initial
	}
	return l.total
}

// parseAttempt reads a script's "hist" line, decoding the order id the
// buyer was told with ids.
func parseAttempt(msg string, ids *orderid.Codec) (verify.Attempt, error) {
	a, err := verify.ParseAttempt(msg)
	if err != nil {
		return a, err
	}
	a.Instance = "instance-" + a.Instance
	if a.OrderRef != "" {
		id, ok := ids.Decode(a.OrderRef)
		if !ok {
			return a, fmt.Errorf("%q: not an order id of this service", msg)
		}
		a.OrderID = id
	}
	return a, nil
}

// scanConsole calls f with each message of k6's console output at path
// (none when k6 logged nothing).
func scanConsole(path string, f func(msg string) error) error {
	file, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if err := f(consoleMsg(sc.Text())); err != nil {
			return err
		}
	}
	return sc.Err()
}

// parse takes a script's restock line: one of unknown outcome (not 200)
// leaves the history unable to conclude.
func (l *restockLog) parse(msg string) error {
	var call, ret, stock, total int64
	var inst, status int
	if _, err := fmt.Sscanf(msg, "restock %d %d %d %d %d %d", &call, &ret, &inst, &stock, &status, &total); err != nil {
		return fmt.Errorf("console: %q: %w", msg, err)
	}
	if status != http.StatusOK {
		l.failed++
		return nil
	}
	l.ops = append(l.ops, verify.Op{Kind: verify.Restock, Stock: stock, Instance: instanceName(inst),
		Call: time.UnixMilli(call), Return: time.UnixMilli(ret).Add(time.Millisecond), Status: status})
	l.total = total
	return nil
}

// checkHistory checks every recorded answer to one SKU, which started the
// sale with initialStock, against one stock counter (verify.CheckHistory),
// resolving unknown outcomes from snap; the history is kept as
// history.jsonl and, violating, drawn as history.html (history-<sku>.*).
func (r *run) checkHistory(attempts []verify.Attempt, snap verify.Snapshot, initialStock int64) (verify.HistoryVerdict, error) {
	h := verify.BuildHistory(initialStock, snap, attempts, r.restocks.ops)
	name := "history"
	if len(r.skuIDs) > 1 {
		name = fmt.Sprintf("history-%d", snap.SKU.ID)
	}
	visualization := name + ".html"
	if err := writeHistory(filepath.Join(r.dir, name+".jsonl"), h); err != nil {
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
	if failed := r.restocks.failed; failed > 0 && v.Result != verify.NotLinear {
		// A restock that may have been applied is missing from the history.
		v.Result = verify.NotConcluded
		v.Reason = fmt.Sprintf("%d restock(s) of unknown outcome are missing from the history", failed)
		v.Violations = append(v.Violations, verify.Violation{Name: verify.HistoryNotConcluded, Message: v.Reason})
	}
	return v, nil
}

// writeHistory keeps the checked history, one operation a line.
func writeHistory(path string, h verify.History) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, op := range h.Ops {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
