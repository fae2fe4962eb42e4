package verify

import (
	"math"
	"slices"
	"sort"
	"time"
)

// certify tries to prove h linearizable without a search, whose every
// subset of concurrent refusals is a distinct state: it gives every sale
// and restock a moment within its interval (placeWrites), checks that the
// sequence never sells a unit that is not there, and finds each refusal a
// moment within its interval at which the sequence refuses it. Moments on
// one clock keep every real-time order, so success is a proof. Failure
// proves nothing; misfit names the first operation left without a moment.
func certify(h History, bound time.Duration) (ok bool, misfit string) {
	if hasKind(h, Returned, Waited, Allotted, Left) { // not modelled by placeWrites
		return false, "returned units or a waitlist, left to the search"
	}
	if !hasKind(h, Maybe) {
		return certifyResolved(h, bound)
	}
	// A linearization with each undecided outcome taken, or each not, is
	// one of the history: not taken leaves more units for the others,
	// taken (as a resolved sale) empties the stock sooner.
	for _, taken := range []bool{false, true} {
		if ok, m := certifyResolved(decideMaybes(h, taken), bound); ok {
			return true, ""
		} else if misfit == "" {
			misfit = m
		}
	}
	return false, misfit + " (undecided outcomes taken neither way)"
}

// hasKind reports whether h has an operation of one of kinds.
func hasKind(h History, kinds ...string) bool {
	return slices.ContainsFunc(h.Ops, func(op Op) bool { return slices.Contains(kinds, op.Kind) })
}

// decideMaybes is h with every undecided outcome a resolved sale (taken)
// or left out.
func decideMaybes(h History, taken bool) History {
	out := h
	out.Ops = make([]Op, 0, len(h.Ops))
	for _, op := range h.Ops {
		if op.Kind == Maybe {
			if !taken {
				continue
			}
			op.Kind, op.Resolved = Bought, true
		}
		out.Ops = append(out.Ops, op)
	}
	return out
}

// certifyResolved is certify of a history without undecided outcomes.
func certifyResolved(h History, bound time.Duration) (ok bool, misfit string) {
	ops, at, misfit := placeWrites(h)
	if misfit != "" {
		return false, misfit
	}
	seq, misfit := replay(h, ops, at)
	if misfit != "" {
		return false, misfit
	}
	for _, r := range h.Ops {
		if misfit := seq.refusal(r, h.PerUserLimit, bound); misfit != "" {
			return false, misfit
		}
	}
	return true, ""
}

// sequence is the writes placed in order: the stock between them and each
// buyer's purchase moments.
type sequence struct {
	at    []int64
	stock []int64            // stock[k] holds from at[k-1] to at[k]: stock[0] before any write
	held  map[string][]int64 // a buyer's purchase moments, one per unit
}

// replay applies the placed writes in order; misfit names a sale that
// finds no unit or takes its buyer past the limit.
func replay(h History, ops []Op, at []int64) (sequence, string) {
	seq := sequence{at: at, stock: make([]int64, len(ops)+1), held: map[string][]int64{}}
	seq.stock[0] = h.InitialStock
	for i, op := range ops {
		if op.Kind == Restock {
			seq.stock[i+1] = op.Stock
			continue
		}
		seq.stock[i+1] = seq.stock[i] - op.Qty
		if seq.stock[i+1] < 0 {
			return seq, "no unit for " + op.String()
		}
		for range op.Qty {
			seq.held[op.User] = append(seq.held[op.User], at[i])
		}
		if h.PerUserLimit > 0 && int64(len(seq.held[op.User])) > h.PerUserLimit {
			return seq, "over the limit: " + op.String()
		}
	}
	return seq, ""
}

// refusal looks for a moment within r's interval at which the sequence
// refuses r; misfit names r when there is none. Any other operation fits.
func (seq sequence) refusal(r Op, limit int64, bound time.Duration) (misfit string) {
	a, b := r.Call.UnixNano(), r.Return.UnixNano()
	switch r.Kind {
	case LimitAnswer:
		// Holdings only grow: the latest moment is the best.
		times := seq.held[r.User]
		have := int64(sort.Search(len(times), func(i int) bool { return times[i] > b }))
		if limit <= 0 || have+r.Qty <= limit {
			return "the buyer below the limit: " + r.String()
		}
	case SoldOutAnswer:
		a -= int64(bound)
		n := len(seq.at)
		k := sort.Search(n+1, func(k int) bool { return seq.end(k) >= a })
		for ; k <= n && seq.start(k) <= b; k++ {
			if seq.stock[k] < r.Qty {
				return ""
			}
		}
		return "units left throughout: " + r.String()
	}
	return ""
}

// start and end bound the span of stock[k].
func (seq sequence) start(k int) int64 {
	if k == 0 {
		return math.MinInt64
	}
	return seq.at[k-1]
}

func (seq sequence) end(k int) int64 {
	if k == len(seq.at) {
		return math.MaxInt64
	}
	return seq.at[k]
}

// placeWrites orders the sales and restocks of h, which has no undecided
// outcome, and gives each a moment within its interval. A restock sets the
// stock, so a unit left before it is lost: before each restock every sale
// invoked by its moment that the stock allows is placed, earliest deadline
// first, each at its invocation (or the previous restock). A restock
// takes effect at its response, or earlier where a sale left without a
// unit had to take one by then. misfit says why no moments were found.
func placeWrites(h History) (ops []Op, at []int64, misfit string) {
	sales, restocks := ofKinds(h.Ops, Bought, Restock)
	sort.Slice(restocks, func(i, j int) bool { return restocks[i].Return.Before(restocks[j].Return) })
	sort.Slice(sales, func(i, j int) bool { return sales[i].Call.Before(sales[j].Call) })
	due := saleDeadlines(h, sales)
	stock := h.InitialStock
	prev := int64(math.MinInt64)
	next := 0 // sales[next:] not yet invoked
	var waiting []dueSale
	for j := 0; j <= len(restocks); j++ {
		from, until := int64(math.MaxInt64), int64(math.MaxInt64) // after the last restock, no moment to move
		if j < len(restocks) {
			from, until = max(prev, restocks[j].Call.UnixNano()), restocks[j].Return.UnixNano()
		}
		for ; next < len(sales) && sales[next].Call.UnixNano() <= until; next++ {
			waiting = append(waiting, dueSale{sales[next], due[next]})
		}
		epoch, left, moment, misfit := sellBefore(waiting, stock, prev, from, until)
		if misfit != "" {
			return nil, nil, misfit
		}
		waiting = left
		for _, s := range epoch {
			ops, at = append(ops, s.Op), append(at, max(s.Call.UnixNano(), prev))
			stock -= s.Qty
		}
		if j < len(restocks) {
			ops, at = append(ops, restocks[j]), append(at, moment)
			stock, prev = restocks[j].Stock, moment
		}
	}
	if len(waiting) > 0 {
		return nil, nil, "no unit for " + waiting[0].String()
	}
	return ops, at, ""
}

// sellBefore chooses the sales of waiting placed before a restock that
// can take effect from from to until (no restock: the end of time), with
// stock units left since the previous one, at prev: those invoked by the
// restock's moment, earliest deadline first, while the stock lasts. When a
// sale left over is due before the moment, the moment moves to its
// deadline and the choice is made again (only earlier: this ends). epoch
// is by invocation; misfit names a sale no moment fits.
func sellBefore(waiting []dueSale, stock, prev, from, until int64) (epoch, left []dueSale, moment int64, misfit string) {
	byDue := append([]dueSale(nil), waiting...)
	sort.SliceStable(byDue, func(a, b int) bool { return byDue[a].due < byDue[b].due })
	moment = until
	for {
		epoch, left = epoch[:0], left[:0]
		units, firstDue, first := stock, int64(math.MaxInt64), dueSale{}
		for _, d := range byDue {
			if d.Call.UnixNano() <= moment && d.Qty <= units {
				if max(d.Call.UnixNano(), prev) > d.due {
					return nil, nil, 0, "a sale due before the last restock: " + d.String()
				}
				units -= d.Qty
				epoch = append(epoch, d)
				continue
			}
			left = append(left, d)
			if d.due < firstDue {
				firstDue, first = d.due, d
			}
		}
		if firstDue >= moment {
			sort.SliceStable(epoch, func(a, b int) bool { return epoch[a].Call.Before(epoch[b].Call) })
			return epoch, left, moment, ""
		}
		if firstDue < from {
			return nil, nil, 0, "no unit for " + first.String()
		}
		moment = firstDue // a sale that had to take a unit by then found none
	}
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
