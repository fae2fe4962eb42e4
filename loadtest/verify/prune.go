package verify

import (
	"sort"
	"time"
)

// settledSoldOuts keeps, of the sold_out answers asked (moved back by the
// bound) after every change to the stock had returned, one per quantity:
// where the state no longer moves one is correct exactly when all are,
// and refusals change no state. A sale's tail costs the search one
// operation.
func settledSoldOuts(h History, bound time.Duration) (History, int) {
	var lastChange time.Time
	for _, op := range h.Ops {
		end := op.Return
		if op.Resolved || op.Kind == Maybe {
			// Its answer was lost: moved to its invocation, it only lowers
			// the stock and raises the holdings the refusals see.
			end = op.Call
		}
		switch op.Kind {
		case Bought, Maybe, Restock, Returned, Allotted:
			if end.After(lastChange) {
				lastChange = end
			}
		}
	}
	out := h
	out.Ops = make([]Op, 0, len(h.Ops))
	kept := map[int64]bool{}
	settled := 0
	for _, op := range h.Ops {
		if op.Kind == SoldOutAnswer && op.Call.Add(-bound).After(lastChange) {
			if kept[op.Qty] {
				settled++
				continue
			}
			kept[op.Qty] = true
		}
		out.Ops = append(out.Ops, op)
	}
	return out, settled
}

// dominatedReads leaves out of the search every refusal (sold_out, or
// limit_exceeded of one buyer) whose interval, a sold_out's moved back by
// the bound, contains another's of the same kind and quantity: refusals
// change no state, so the outer one fits right beside the inner one
// wherever it goes. Concurrent refusals are what blow the search up.
func dominatedReads(h History, bound time.Duration) (History, int) {
	type group struct {
		kind, user string
		qty        int64
	}
	type span struct {
		i         int
		call, ret time.Time
	}
	groups := map[group][]span{}
	for i, op := range h.Ops {
		switch op.Kind {
		case SoldOutAnswer:
			g := group{op.Kind, "", op.Qty}
			groups[g] = append(groups[g], span{i, op.Call.Add(-bound), op.Return})
		case LimitAnswer:
			g := group{op.Kind, op.User, op.Qty}
			groups[g] = append(groups[g], span{i, op.Call, op.Return})
		}
	}
	drop := map[int]bool{}
	for _, spans := range groups {
		// By call, the longest first; from the end, a span reaching the
		// earliest return seen after it contains that span.
		sort.Slice(spans, func(a, b int) bool {
			if !spans[a].call.Equal(spans[b].call) {
				return spans[a].call.Before(spans[b].call)
			}
			return spans[a].ret.After(spans[b].ret)
		})
		var minReturn time.Time
		for k := len(spans) - 1; k >= 0; k-- {
			if k < len(spans)-1 && !spans[k].ret.Before(minReturn) {
				drop[spans[k].i] = true
				continue
			}
			minReturn = spans[k].ret
		}
	}
	if len(drop) == 0 {
		return h, 0
	}
	out := h
	out.Ops = make([]Op, 0, len(h.Ops)-len(drop))
	for i, op := range h.Ops {
		if !drop[i] {
			out.Ops = append(out.Ops, op)
		}
	}
	return out, len(drop)
}
