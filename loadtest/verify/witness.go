package verify

import (
	"fmt"
	"sort"
	"time"
)

// saleAfterSoldOut finds a 201 invoked after a sold_out answer returned
// with no restock or returned order that can fall between them (the
// sold_out's invocation moved back by the bound): the stock only falls
// between them. O(n log n) without returns.
func saleAfterSoldOut(ops []Op, bound time.Duration) []Violation {
	var soldOuts, restocks []Op
	for _, op := range ops {
		switch op.Kind {
		case SoldOutAnswer:
			soldOuts = append(soldOuts, op)
		case Restock, Returned:
			restocks = append(restocks, op)
		}
	}
	if len(soldOuts) == 0 {
		return nil
	}
	sort.Slice(soldOuts, func(i, j int) bool { return soldOuts[i].Return.Before(soldOuts[j].Return) })
	// latest[i] is the sold_out among soldOuts[:i+1] invoked last.
	latest := make([]int, len(soldOuts))
	for i := range soldOuts {
		latest[i] = i
		if i > 0 && soldOuts[latest[i-1]].Call.After(soldOuts[i].Call) {
			latest[i] = latest[i-1]
		}
	}
	var out []Violation
	for _, b := range ops {
		if b.Kind != Bought || b.Resolved {
			continue
		}
		// The sold_out must have returned before the sale was invoked.
		n := sort.Search(len(soldOuts), func(i int) bool { return !soldOuts[i].Return.Before(b.Call) })
		if n == 0 {
			continue
		}
		s := soldOuts[latest[n-1]]
		if s.Qty > b.Qty {
			continue // "fewer than 2 left" does not refute a sale of 1
		}
		if restockBetween(restocks, s.Call.Add(-bound), b.Return) {
			continue
		}
		out = append(out, Violation{Name: SaleAfterSoldOut, Message: fmt.Sprintf(
			"a sale after a sold_out with no restock between: sold_out %s; then sale %s (%s after the sold_out answered)",
			s, b, b.Call.Sub(s.Return))})
		if len(out) == maxWitnesses {
			break
		}
	}
	return out
}

// restockBetween reports a restock or returned order that can be
// linearized after from and before to.
func restockBetween(restocks []Op, from, to time.Time) bool {
	for _, r := range restocks {
		if r.Return.After(from) && r.Call.Before(to) && (r.Stock > 0 || r.Kind == Returned) {
			return true
		}
	}
	return false
}

// soldPastZero counts, between each restock and the next (the initial
// stock before the first), the units of the sales that can only fall
// between the two: more than the first set, and the returns that can fall
// between them, is an oversell whatever the order. O(n log n) without
// returns.
func soldPastZero(h History) []Violation {
	restocks, returns := ofKinds(h.Ops, Restock, Returned)
	sort.Slice(restocks, func(i, j int) bool { return restocks[i].Call.Before(restocks[j].Call) })
	sold, last := epochSales(h.Ops, restocks)
	returned := epochReturns(returns, restocks)
	var out []Violation
	for k, n := range sold {
		set, after := h.InitialStock, "the start"
		if k > 0 {
			set, after = restocks[k-1].Stock, restocks[k-1].String()
		}
		if n > set+returned[k] {
			out = append(out, Violation{Name: SoldPastZero, Message: fmt.Sprintf(
				"%d units sold after %s, where %d were there and %d could come back, by sales that no restock can fall between; the last: %s",
				n, after, set, returned[k], last[k])})
		}
	}
	return out
}

// epochSales counts, for each epoch k (after restocks[k-1], before
// restocks[k]), the units of the sales that can only fall within it, and
// names the latest of them.
func epochSales(ops, restocks []Op) (sold []int64, last []Op) {
	sold = make([]int64, len(restocks)+1)
	last = make([]Op, len(restocks)+1)
	for _, b := range ops {
		if b.Kind != Bought {
			continue
		}
		// restocks[:k] answered before b was invoked.
		k := sort.Search(len(restocks), func(i int) bool { return !restocks[i].Return.Before(b.Call) })
		if k < len(restocks) && !b.Return.Before(restocks[k].Call) {
			continue // it may fall after the next restock
		}
		sold[k] += b.Qty
		if last[k].Kind == "" || b.Call.After(last[k].Call) {
			last[k] = b
		}
	}
	return sold, last
}

// epochReturns counts, for each epoch, the units returned orders may give
// back within it.
func epochReturns(returns, restocks []Op) []int64 {
	returned := make([]int64, len(restocks)+1)
	for _, r := range returns {
		for k := range returned {
			if (k == 0 || r.Return.After(restocks[k-1].Call)) && (k == len(restocks) || r.Call.Before(restocks[k].Return)) {
				returned[k] += r.Qty
			}
		}
	}
	return returned
}

// soldOutWhileStockRemained finds sold_out answers invoked more than the
// bound after the last restock or returned order while the sale ended
// with their quantity left: the stock only falls after that, so it was
// there all along.
func soldOutWhileStockRemained(ops []Op, bound time.Duration, final int64) []Violation {
	if final <= 0 {
		return nil
	}
	var lastRestock time.Time
	for _, op := range ops {
		if (op.Kind == Restock || op.Kind == Returned) && op.Return.After(lastRestock) {
			lastRestock = op.Return
		}
	}
	var out []Violation
	for _, s := range ops {
		if s.Kind != SoldOutAnswer || s.Qty > final || !s.Call.Add(-bound).After(lastRestock) {
			continue
		}
		out = append(out, Violation{Name: SoldOutWhileStockRemained, Message: fmt.Sprintf(
			"sold_out %s, yet %d unit(s) remained at the end with no restock or returned order after it", s, final)})
		if len(out) == maxWitnesses {
			break
		}
	}
	return out
}
