package verify

import (
	"fmt"
	"hash/maphash"
	"maps"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdicts of the history check.
const (
	Linearizable = "linearizable"
	NotLinear    = "violated"
	// NotConcluded: the check ran out of its budget (operations or time)
	// before it could decide. It is not a pass.
	NotConcluded = "not concluded"
)

// Violation names of the history check.
const (
	// SaleAfterSoldOut: a 201 sale invoked after a sold_out answer had
	// returned, with no restock that could fall between.
	SaleAfterSoldOut = "sale_after_sold_out"
	// SoldPastZero: more units sold between two restocks (or before the
	// first, or after the last) than the stock the earlier one set, by
	// sales that can only fall between them.
	SoldPastZero = "sold_past_zero"
	// SoldOutWhileStockRemained: a sold_out answer after the last restock
	// (beyond the staleness bound) while the sale ended with units left.
	SoldOutWhileStockRemained = "sold_out_while_stock_remained"
	// HistoryNotLinearizable: Porcupine found no order of the operations,
	// each within its interval, that one stock counter could have
	// answered.
	HistoryNotLinearizable = "history_not_linearizable"
	// HistoryNotConcluded: the history check could not decide.
	HistoryNotConcluded = "history_not_concluded"
)

// HistoryOptions bound the history check.
type HistoryOptions struct {
	// SoldOutBound is the only staleness the model accepts: a sold_out
	// answer is correct if the stock was below the quantity at some
	// point within [invocation - SoldOutBound, response]. It is the
	// service's documented bound for a sold-out mark to follow a restock
	// made through another instance (sold_out.local_ttl + sold_out.recheck).
	SoldOutBound time.Duration
	// MaxOps bounds the operations given to Porcupine, whose search keeps
	// a bitset of the history per step (memory grows with the square of
	// the operations); a longer history the certificate cannot prove is
	// not concluded. Zero: 40,000 (about 200 MB at worst). Sold_out
	// answers settled without the search (see settledSoldOuts) and
	// refusals implied by another (dominatedReads) do not count; the
	// certificate, linear in the operations, is tried whatever their number.
	MaxOps int
	// Timeout bounds Porcupine's search. Zero: one minute.
	Timeout time.Duration
	// FinalStock is the SKU's stock after the sale settled; negative when
	// unknown (the sold_out-while-stock-remained witness is then skipped).
	FinalStock int64
	// Visualization, when not empty, is where Porcupine's HTML
	// visualization of a violating history is written.
	Visualization string
}

// HistoryVerdict is the outcome of CheckHistory.
type HistoryVerdict struct {
	Result        string `json:"result"`
	Ops           int    `json:"operations"`
	Bought        int    `json:"bought"`
	SoldOut       int    `json:"sold_out"`
	LimitExceeded int    `json:"limit_exceeded"`
	Restocks      int    `json:"restocks"`
	Returns       int    `json:"returns"`
	// Settled counts the sold_out answers asked after every change to
	// the stock, which one of them stands for in the search.
	Settled int `json:"sold_out_settled"`
	// Dominated counts the refusals left out of the search because the
	// interval of another, of the same kind, lies within theirs.
	Dominated int `json:"refusals_dominated"`
	// Searched counts the operations left for the certificate and, if
	// it fails, Porcupine: Ops less Settled and Dominated.
	Searched int `json:"searched"`
	// Certified: the sales and restocks were ordered alone and every
	// refusal fitted that order (see certify); no full search was needed.
	Certified     bool        `json:"certified,omitempty"`
	Resolution    Resolution  `json:"unknown_outcomes"`
	BoundMS       int64       `json:"sold_out_bound_ms"`
	Witnesses     []string    `json:"witnesses,omitempty"`
	Reason        string      `json:"reason,omitempty"`
	Took          float64     `json:"took_s"`
	Visualization string      `json:"visualization,omitempty"`
	Violations    []Violation `json:"-"`
}

// Pass reports a concluded check that found every answer linearizable.
func (v HistoryVerdict) Pass() bool { return v.Result == Linearizable }

func (v HistoryVerdict) String() string {
	s := fmt.Sprintf("%s: %d operations (%d bought, %d sold_out of which %d after the last change, %d limit_exceeded, %d restocks, %d returns; %d refusals implied by another; %d unknown outcomes: %d happened, %d did not, %d undecided), sold-out bound %dms, %.1fs",
		v.Result, v.Ops, v.Bought, v.SoldOut, v.Settled, v.LimitExceeded, v.Restocks, v.Returns, v.Dominated,
		v.Resolution.Unknown, v.Resolution.Happened, v.Resolution.Dropped, v.Resolution.Undecided, v.BoundMS, v.Took)
	switch {
	case v.Certified:
		s += fmt.Sprintf("; %d operations proved by the certificate", v.Searched)
	case v.Result != NotConcluded || v.Reason == "":
		s += fmt.Sprintf("; %d operations searched by Porcupine", v.Searched)
	}
	if v.Reason != "" {
		s += "; " + v.Reason
	}
	return s
}

// witnessedSearch bounds the search of a history a witness already
// proved violated.
const witnessedSearch = 10 * time.Second

// maxWitnesses bounds the witnesses reported.
const maxWitnesses = 5

// CheckHistory checks that every answer of h is linearizable against one
// stock counter with per-user holdings. The exact witnesses run first
// (sold_out then a sale with no restock between; sold_out while the stock
// that remained at the end was there); then Porcupine searches for a
// linearization. A violation is reported with the operations involved.
func CheckHistory(h History, opt HistoryOptions) HistoryVerdict {
	start := time.Now()
	if opt.MaxOps == 0 {
		opt.MaxOps = 40000
	}
	if opt.Timeout == 0 {
		opt.Timeout = time.Minute
	}
	v := HistoryVerdict{Ops: len(h.Ops), Resolution: h.Resolution, BoundMS: opt.SoldOutBound.Milliseconds()}
	for _, op := range h.Ops {
		switch op.Kind {
		case Bought:
			v.Bought++
		case SoldOutAnswer:
			v.SoldOut++
		case LimitAnswer:
			v.LimitExceeded++
		case Restock:
			v.Restocks++
		case Returned:
			v.Returns++
		}
	}

	v.Violations = append(v.Violations, saleAfterSoldOut(h.Ops, opt.SoldOutBound)...)
	v.Violations = append(v.Violations, soldOutWhileStockRemained(h.Ops, opt.SoldOutBound, opt.FinalStock)...)
	v.Violations = append(v.Violations, soldPastZero(h)...)

	searched, settled := settledSoldOuts(h, opt.SoldOutBound)
	searched, dominated := dominatedReads(searched, opt.SoldOutBound)
	v.Settled, v.Dominated, v.Searched = settled, dominated, len(searched.Ops)
	var misfit string
	if len(v.Violations) == 0 {
		v.Certified, misfit = certify(searched, opt.SoldOutBound)
	}
	switch {
	case v.Certified:
		v.Result = Linearizable
	case len(searched.Ops) > opt.MaxOps:
		v.Result = NotConcluded
		v.Reason = fmt.Sprintf("%d operations exceed the search's bound of %d", len(searched.Ops), opt.MaxOps)
	default:
		model := stockModel(searched, opt.SoldOutBound)
		ops := porcupineOps(searched, opt.SoldOutBound)
		timeout := opt.Timeout
		if len(v.Violations) > 0 {
			// A witness already decided: the search only adds its drawing,
			// and proving a violated history must exhaust every order.
			timeout = min(timeout, witnessedSearch)
		}
		res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
		switch res {
		case porcupine.Ok:
			v.Result = Linearizable
		case porcupine.Illegal:
			v.Result = NotLinear
			v.Violations = append(v.Violations, Violation{Name: HistoryNotLinearizable, Message: fmt.Sprintf(
				"no order of the %d operations within their intervals is one stock counter's (sold-out bound %s)", len(ops), opt.SoldOutBound)})
			if opt.Visualization != "" {
				if err := porcupine.VisualizePath(model, info, opt.Visualization); err != nil {
					v.Reason = fmt.Sprintf("visualization not written: %v", err)
				} else {
					v.Visualization = opt.Visualization
				}
			}
		default:
			v.Result = NotConcluded
			v.Reason = fmt.Sprintf("the search of %d operations did not finish within %s", len(ops), timeout)
			// The longest partial linearizations found show where it stuck.
			if opt.Visualization != "" && porcupine.VisualizePath(model, info, opt.Visualization) == nil {
				v.Visualization = opt.Visualization
			}
		}
	}
	if len(v.Violations) > 0 {
		v.Result = NotLinear
	}
	if v.Result == NotConcluded {
		if misfit != "" {
			// Where the certificate stopped is the lead to follow.
			v.Reason += "; the certificate stopped at " + misfit
		}
		v.Violations = append(v.Violations, Violation{Name: HistoryNotConcluded, Message: v.Reason})
	}
	v.Took = time.Since(start).Round(time.Millisecond).Seconds()
	for _, x := range v.Violations {
		if len(v.Witnesses) < maxWitnesses {
			v.Witnesses = append(v.Witnesses, x.Message)
		}
	}
	if opt.Visualization != "" && v.Visualization == "" {
		_ = os.Remove(opt.Visualization) // a stale one from an earlier check would mislead
	}
	return v
}

// saleAfterSoldOut finds a 201 invoked after a sold_out answer returned,
// with no restock or returned order whose interval reaches past the
// sold_out's invocation minus the bound and starts before the sale
// returned: the stock only falls between them, so the sale took a unit
// that was not there (or the sold_out was false). O(n log n) without
// returns.
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
// stock before the first), the units of the sales invoked after the one
// answered and answered before the next was invoked: they can only be
// linearized between the two, where at most the stock the first set was
// there, plus the units of returned orders that can fall between them.
// More is an oversell, whatever the order. O(n log n) without returns.
func soldPastZero(h History) []Violation {
	var restocks, returns []Op
	for _, op := range h.Ops {
		switch op.Kind {
		case Restock:
			restocks = append(restocks, op)
		case Returned:
			returns = append(returns, op)
		}
	}
	sort.Slice(restocks, func(i, j int) bool { return restocks[i].Call.Before(restocks[j].Call) })
	sold := make([]int64, len(restocks)+1) // epoch k follows restocks[k-1]
	last := make([]Op, len(restocks)+1)    // each epoch's latest sale, for the message
	for _, b := range h.Ops {
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
	returned := make([]int64, len(restocks)+1) // units that may come back within epoch k
	for _, r := range returns {
		for k := range returned {
			if (k == 0 || r.Return.After(restocks[k-1].Call)) && (k == len(restocks) || r.Call.Before(restocks[k].Return)) {
				returned[k] += r.Qty
			}
		}
	}
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

// soldOutWhileStockRemained finds sold_out answers invoked more than the
// bound after the last restock or returned order, when the sale ended
// with at least their quantity left: the stock only falls after the last
// of those, so it was there all along.
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

// stockState is the model's state: the remaining stock and the holdings
// of the users with more than one operation (a user's first purchase
// starts from zero, so only repeat buyers need remembering). It is never
// mutated: a step that changes it copies it.
type stockState struct {
	stock int64
	held  map[string]int64
}

// stockInput is an operation as the model sees it.
type stockInput struct {
	op      Op
	tracked bool // the user's holdings are kept in the state
}

var hashSeed = maphash.MakeSeed()

// stockModel is one SKU: a stock counter, per-user holdings up to the
// limit, restocks that set the remaining stock and returned orders that
// add theirs back (and leave their buyer's holdings). Outcomes that may or
// may not have happened (Maybe) step either way.
func stockModel(h History, bound time.Duration) porcupine.Model {
	limit := h.PerUserLimit
	step := func(st any, in any, _ any) []any {
		s, op := st.(stockState), in.(stockInput)
		held := int64(0)
		if op.tracked {
			held = s.held[op.op.User]
		}
		take := func() any {
			n := stockState{stock: s.stock - op.op.Qty, held: s.held}
			if op.tracked {
				n.held = maps.Clone(s.held)
				n.held[op.op.User] = held + op.op.Qty
			}
			return n
		}
		canTake := s.stock >= op.op.Qty && (limit <= 0 || held+op.op.Qty <= limit)
		switch op.op.Kind {
		case Restock:
			return []any{stockState{stock: op.op.Stock, held: s.held}}
		case Returned:
			n := stockState{stock: s.stock + op.op.Qty, held: s.held}
			if op.tracked {
				n.held = maps.Clone(s.held)
				n.held[op.op.User] = held - op.op.Qty
			}
			return []any{n}
		case Bought:
			if canTake {
				return []any{take()}
			}
		case Maybe:
			if canTake {
				return []any{s, take()}
			}
			return []any{s}
		case SoldOutAnswer:
			if s.stock < op.op.Qty {
				return []any{s}
			}
		case LimitAnswer:
			if limit > 0 && held+op.op.Qty > limit {
				return []any{s}
			}
		}
		return nil
	}
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{stockState{stock: h.InitialStock, held: map[string]int64{}}} },
		Step: step,
		Equal: func(a, b any) bool {
			x, y := a.(stockState), b.(stockState)
			return x.stock == y.stock && maps.Equal(x.held, y.held)
		},
		Hash: func(st any) uint64 {
			s := st.(stockState)
			sum := uint64(s.stock)
			for u, n := range s.held {
				sum += maphash.String(hashSeed, u) * uint64(n)
			}
			return sum
		},
		DescribeOperation: func(in, _ any) string {
			op := in.(stockInput).op
			switch op.Kind {
			case Restock:
				return fmt.Sprintf("restock(%d)", op.Stock)
			case Returned:
				return fmt.Sprintf("%s returns %d", op.User, op.Qty)
			}
			return fmt.Sprintf("%s buys %d → %s @%s", op.User, op.Qty, op.Kind, op.Instance)
		},
		DescribeState: func(st any) string {
			s := st.(stockState)
			return fmt.Sprintf("stock %d", s.stock)
		},
	}
	return nm.ToModel()
}

// porcupineOps converts h for Porcupine: nanoseconds on one clock, a
// sold_out's invocation moved back by the bound (the only staleness the
// model accepts), each user tracked only if it has more than one
// operation.
func porcupineOps(h History, bound time.Duration) []porcupine.Operation {
	count := map[string]int{}
	maxClient := 0
	for _, op := range h.Ops {
		if op.Kind != Restock {
			count[op.User]++
		}
		maxClient = max(maxClient, op.Client)
	}
	ops := make([]porcupine.Operation, 0, len(h.Ops))
	for _, op := range h.Ops {
		call := op.Call
		if op.Kind == SoldOutAnswer {
			call = call.Add(-bound)
		}
		client := op.Client
		if op.Kind == Restock || op.Kind == Returned {
			client = maxClient + 1
		}
		ops = append(ops, porcupine.Operation{
			ClientId: client,
			Input:    stockInput{op: op, tracked: op.Kind != Restock && count[op.User] > 1},
			Call:     call.UnixNano(),
			Return:   op.Return.UnixNano(),
		})
	}
	return ops
}

// settledSoldOuts keeps, of the sold_out answers asked (even moved back
// by the bound) after every operation that changes the stock had
// returned, one per quantity: real time puts them all after every change,
// where the state no longer moves, so one is correct exactly when all
// are, and they constrain nothing else (they change no state). The tail
// of a sale, thousands of sold_out answers after the sell-out, so costs
// the search one operation.
func settledSoldOuts(h History, bound time.Duration) (History, int) {
	var lastChange time.Time
	for _, op := range h.Ops {
		end := op.Return
		if op.Resolved || op.Kind == Maybe {
			// Answered at the end of the history only because its answer
			// was lost: it can be moved to just after its invocation (and
			// after what returned before that), which only lowers the
			// stock and raises holdings the refusals in between see.
			end = op.Call
		}
		switch op.Kind {
		case Bought, Maybe, Restock, Returned:
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
// the bound, contains the interval of another refusal of the same kind
// and quantity. Refusals change no state, so wherever a linearization
// places the inner one, the outer one fits right beside it, with every
// real-time order kept: the two histories are linearizable together or
// not at all. Many concurrent refusals are what make the search blow up
// (every subset of them is a distinct state), so this keeps it small.
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
		// By call, the longest first among equal calls; scanning from the
		// end, a span that reaches the earliest return seen after it
		// contains that span.
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
