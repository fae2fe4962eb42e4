package verify

import (
	"container/heap"
	"math"
	"sort"
	"time"
)

// certify tries to prove h linearizable without a search. Refusals
// (sold_out, limit_exceeded) change no state, yet they are what makes
// Porcupine's search blow up: every subset of the concurrent refusals is a
// distinct state; long requests (a paused instance answers seconds late)
// do the same to sales. So certify gives every sale and restock a moment
// within its interval by construction (placeWrites), checks that the
// sequence never sells a unit that is not there, and then looks for each
// refusal's moment within its interval at which that sequence refuses it.
// Moments on one clock keep every real-time order, so success is a
// linearization of the whole history: a proof. Failure proves nothing
// (other moments might fit): the caller then runs the full search.
func certify(h History, bound time.Duration) bool {
	ops, at, ok := placeWrites(h)
	if !ok {
		return false
	}
	n := len(ops)
	// stock[k] holds from at[k-1] to at[k]: stock[0] before any write.
	stock := make([]int64, n+1)
	stock[0] = h.InitialStock
	held := map[string][]int64{} // a buyer's purchase moments, one per unit
	for i, op := range ops {
		switch op.Kind {
		case Restock:
			stock[i+1] = op.Stock
		default:
			stock[i+1] = stock[i] - op.Qty
			if stock[i+1] < 0 {
				return false
			}
			for range op.Qty {
				held[op.User] = append(held[op.User], at[i])
			}
			if h.PerUserLimit > 0 && int64(len(held[op.User])) > h.PerUserLimit {
				return false
			}
		}
	}
	start := func(k int) int64 {
		if k == 0 {
			return math.MinInt64
		}
		return at[k-1]
	}
	end := func(k int) int64 {
		if k == n {
			return math.MaxInt64
		}
		return at[k]
	}
	for _, r := range h.Ops {
		a, b := r.Call.UnixNano(), r.Return.UnixNano()
		switch r.Kind {
		case LimitAnswer:
			// Holdings only grow: the latest moment is the best.
			times := held[r.User]
			have := int64(sort.Search(len(times), func(i int) bool { return times[i] > b }))
			if h.PerUserLimit <= 0 || have+r.Qty <= h.PerUserLimit {
				return false
			}
		case SoldOutAnswer:
			a -= int64(bound)
			k := sort.Search(n+1, func(k int) bool { return end(k) >= a })
			found := false
			for ; k <= n && start(k) <= b; k++ {
				if stock[k] < r.Qty {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// placeWrites orders the sales and restocks of h and gives each a moment
// within its interval: a restock at its response; between two restocks,
// every sale invoked by the next one that the stock allows, earliest
// response first, each at its invocation (or the previous restock). A
// restock sets the stock, so a unit left before it is lost: selling as
// much as possible before each restock never hurts a later sale, and it
// opens each sold-out window as early as it can open. ok is false when a
// sale finds no unit by its response, or with an outcome left undecided.
func placeWrites(h History) (ops []Op, at []int64, ok bool) {
	var sales, restocks []Op
	for _, op := range h.Ops {
		switch op.Kind {
		case Bought:
			sales = append(sales, op)
		case Restock:
			restocks = append(restocks, op)
		case Maybe:
			return nil, nil, false
		}
	}
	sort.Slice(restocks, func(i, j int) bool { return restocks[i].Return.Before(restocks[j].Return) })
	sort.Slice(sales, func(i, j int) bool { return sales[i].Call.Before(sales[j].Call) })
	due := saleDeadlines(h, sales)
	stock := h.InitialStock
	prev := int64(math.MinInt64)
	next := 0 // sales[next:] not yet invoked
	var waiting byReturn
	for j := 0; j <= len(restocks); j++ {
		until := int64(math.MaxInt64)
		if j < len(restocks) {
			until = restocks[j].Return.UnixNano()
		}
		for ; next < len(sales) && sales[next].Call.UnixNano() <= until; next++ {
			heap.Push(&waiting, dueSale{sales[next], due[next]})
		}
		var epoch []Op
		for waiting.Len() > 0 && waiting[0].Qty <= stock {
			d := heap.Pop(&waiting).(dueSale)
			s := d.Op
			if max(s.Call.UnixNano(), prev) > d.due {
				return nil, nil, false // it had to sell before the last restock
			}
			stock -= s.Qty
			epoch = append(epoch, s)
		}
		if waiting.Len() > 0 && waiting[0].due < until {
			return nil, nil, false // a sale that had to take a unit here found none
		}
		sort.SliceStable(epoch, func(a, b int) bool { return epoch[a].Call.Before(epoch[b].Call) })
		for _, s := range epoch {
			ops, at = append(ops, s), append(at, max(s.Call.UnixNano(), prev))
		}
		if j < len(restocks) {
			ops, at = append(ops, restocks[j]), append(at, until)
			stock, prev = restocks[j].Stock, until
		}
	}
	if waiting.Len() > 0 {
		return nil, nil, false
	}
	return ops, at, true
}

// saleDeadlines is when each sale must have taken place at the latest:
// its response, or earlier where a limit_exceeded answer needs the buyer's
// first purchases made by its own response.
func saleDeadlines(h History, sales []Op) []int64 {
	due := make([]int64, len(sales))
	byUser := map[string][]int{}
	for i, s := range sales {
		due[i] = s.Return.UnixNano()
		byUser[s.User] = append(byUser[s.User], i)
	}
	for _, r := range h.Ops {
		if r.Kind != LimitAnswer || h.PerUserLimit <= 0 {
			continue
		}
		need := h.PerUserLimit - r.Qty + 1
		b := r.Return.UnixNano()
		for _, i := range byUser[r.User] { // by invocation
			if need <= 0 || sales[i].Call.UnixNano() > b {
				break
			}
			due[i] = min(due[i], b)
			need -= sales[i].Qty
		}
	}
	return due
}

// dueSale is a sale and when it must have taken place.
type dueSale struct {
	Op
	due int64
}

// byReturn is a min-heap of sales by deadline.
type byReturn []dueSale

func (q byReturn) Len() int           { return len(q) }
func (q byReturn) Less(i, j int) bool { return q[i].due < q[j].due }
func (q byReturn) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *byReturn) Push(x any)        { *q = append(*q, x.(dueSale)) }
func (q *byReturn) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
