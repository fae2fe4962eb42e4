package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
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

// restockLog records the operations the runner (or a script) timed
// beside the buyers' requests: restocks, and in the lifecycle run the
// orders' returns.
type restockLog struct {
	mu     sync.Mutex
	ops    []verify.Op
	total  int64 // total_stock after the last restock, 0 before any
	failed int   // restocks of unknown outcome
}

// add records op and, when not 0, the total_stock a restock left.
func (l *restockLog) add(op verify.Op, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
	if total != 0 {
		l.total = total
	}
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

// list returns the operations and the restocks of unknown outcome.
func (l *restockLog) list() ([]verify.Op, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]verify.Op(nil), l.ops...), l.failed
}

// readHistory reads a script's "hist" lines from k6's console output,
// decoding the order ids buyers were told with ids, and adds its
// "restock <call ms> <return ms> <instance> <stock> <status> <total_stock>"
// lines to restocks.
func readHistory(path string, ids *orderid.Codec, restocks *restockLog) ([]verify.Attempt, error) {
	var out []verify.Attempt
	err := scanConsole(path, func(msg string) error {
		if strings.HasPrefix(msg, "restock ") {
			return restocks.parse(msg)
		}
		if !strings.HasPrefix(msg, verify.HistoryLinePrefix) {
			return nil
		}
		a, err := verify.ParseAttempt(msg)
		if err != nil {
			return err
		}
		a.Instance = "instance-" + a.Instance
		if a.OrderRef != "" {
			id, ok := ids.Decode(a.OrderRef)
			if !ok {
				return fmt.Errorf("%q: not an order id of this service", msg)
			}
			a.OrderID = id
		}
		out = append(out, a)
		return nil
	})
	return out, err
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
		l.fail()
		return nil
	}
	l.add(verify.Op{Kind: verify.Restock, Stock: stock, Instance: fmt.Sprintf("instance-%d", inst),
		Call: time.UnixMilli(call), Return: time.UnixMilli(ret).Add(time.Millisecond), Status: status}, total)
	return nil
}

// checkHistory checks every recorded answer to one SKU, which started the
// sale with initialStock, against one stock counter (verify.CheckHistory),
// resolving unknown outcomes from snap, the settled state of the SKU. A
// violating history is drawn in the results directory as visualization.
func (r *run) checkHistory(attempts []verify.Attempt, snap verify.Snapshot, initialStock int64, visualization string) (verify.HistoryVerdict, error) {
	timed, failed := r.restocks.list()
	h := verify.BuildHistory(initialStock, snap, attempts, timed)
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
	if failed > 0 && v.Result != verify.NotLinear {
		// A restock that may have been applied is missing from the history.
		v.Result = verify.NotConcluded
		v.Reason = fmt.Sprintf("%d restock(s) of unknown outcome are missing from the history", failed)
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
