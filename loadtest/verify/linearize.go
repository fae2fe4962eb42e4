package verify

import (
	"fmt"
	"os"
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

// Violation names of the history check (loadtest/README.md).
const (
	SaleAfterSoldOut          = "sale_after_sold_out"           // a 201 invoked after a sold_out had returned, with no restock that could fall between
	SoldPastZero              = "sold_past_zero"                // more units sold between two restocks than the earlier one set, by sales that can only fall between them
	SoldOutWhileStockRemained = "sold_out_while_stock_remained" // a sold_out after the last restock (beyond the bound) while the sale ended with units left
	HistoryNotLinearizable    = "history_not_linearizable"      // no order of the operations, each within its interval, is one stock counter's
	HistoryNotConcluded       = "history_not_concluded"         // the history check could not decide
)

// HistoryOptions bound the history check.
type HistoryOptions struct {
	// SoldOutBound is the only staleness the model accepts: a sold_out is
	// correct if the stock was below its quantity at some point within
	// [invocation - SoldOutBound, response] (sold_out.local_ttl + sold_out.recheck).
	SoldOutBound time.Duration
	// MaxOps bounds the operations searched by Porcupine, whose memory
	// grows with their square; zero: 40,000 (about 200 MB at worst).
	MaxOps        int
	Timeout       time.Duration // Porcupine's search; zero: one minute
	FinalStock    int64         // after the sale settled; negative when unknown
	Visualization string        // where a violating history is drawn, if not empty
}

// HistoryVerdict is the outcome of CheckHistory.
type HistoryVerdict struct {
	Result        string      `json:"result"`
	Ops           int         `json:"operations"`
	Bought        int         `json:"bought"`
	SoldOut       int         `json:"sold_out"`
	LimitExceeded int         `json:"limit_exceeded"`
	Restocks      int         `json:"restocks"`
	Returns       int         `json:"returns"`
	Settled       int         `json:"sold_out_settled"`    // sold_out answers after every change, one standing for all (settledSoldOuts)
	Dominated     int         `json:"refusals_dominated"`  // refusals implied by another (dominatedReads)
	Searched      int         `json:"searched"`            // Ops less Settled and Dominated
	Certified     bool        `json:"certified,omitempty"` // proved by certify, without a search
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

const (
	witnessedSearch = 10 * time.Second // the search of a history a witness proved violated: only its drawing
	maxWitnesses    = 5
)

// CheckHistory checks that every answer of h is linearizable against one
// stock counter with per-user holdings: the exact witnesses first, then
// the certificate, then Porcupine's search (loadtest/README.md). A
// violation is reported with the operations involved.
func CheckHistory(h History, opt HistoryOptions) HistoryVerdict {
	start := time.Now()
	if opt.MaxOps == 0 {
		opt.MaxOps = 40000
	}
	if opt.Timeout == 0 {
		opt.Timeout = time.Minute
	}
	v := HistoryVerdict{Ops: len(h.Ops), Resolution: h.Resolution, BoundMS: opt.SoldOutBound.Milliseconds()}
	v.count(h.Ops)
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
		v.search(searched, opt)
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
	for _, x := range v.Violations[:min(len(v.Violations), maxWitnesses)] {
		v.Witnesses = append(v.Witnesses, x.Message)
	}
	if opt.Visualization != "" && v.Visualization == "" {
		_ = os.Remove(opt.Visualization) // a stale one from an earlier check would mislead
	}
	return v
}

// count counts the operations by kind.
func (v *HistoryVerdict) count(ops []Op) {
	n := map[string]int{}
	for _, op := range ops {
		n[op.Kind]++
	}
	v.Bought, v.SoldOut, v.LimitExceeded, v.Restocks, v.Returns = n[Bought], n[SoldOutAnswer], n[LimitAnswer], n[Restock], n[Returned]
}

// search runs Porcupine over the searched operations and records what it
// decided, drawing a violating (or unfinished) search.
func (v *HistoryVerdict) search(searched History, opt HistoryOptions) {
	model := stockModel(searched)
	ops := porcupineOps(searched, opt.SoldOutBound)
	timeout := opt.Timeout
	if len(v.Violations) > 0 {
		timeout = min(timeout, witnessedSearch) // proving it violated would exhaust every order
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
