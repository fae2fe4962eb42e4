package verify

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Kinds of recorded answer to an order request, and the restock.
const (
	// Bought: the request took Qty units (201, or 200 for a retry whose
	// earlier attempt's answer was lost, or an unknown outcome whose order
	// the database holds).
	Bought = "bought"
	// SoldOutAnswer: 409 sold_out, the buyer was told no unit was left.
	SoldOutAnswer = "sold_out"
	// LimitAnswer: 409 limit_exceeded.
	LimitAnswer = "limit_exceeded"
	// Maybe: an unknown outcome the database cannot decide (a buyer
	// without Idempotency-Key who has more such requests than unclaimed
	// orders): it may or may not have taken a unit.
	Maybe = "maybe"
	// Restock: an admin PUT of the remaining stock.
	Restock = "restock"
	// Returned: an order's units went back to stock (a cancel, or the
	// sweeper's expiry) at some moment within the operation's interval;
	// the buyer's holdings fall by as much.
	Returned = "returned"
	// Waited: 202, the buyer was given a waiting order, which holds no
	// unit but counts toward the limit: no unit could serve it then.
	Waited = "waited"
	// Allotted: units that came back went to the buyer's waiting order,
	// within the interval (the time its transaction recorded, and the
	// slack of its commit).
	Allotted = "allotted"
	// Left: the buyer's waiting order left the line without units (it
	// lapsed at the sale's end, or was cancelled) within the interval.
	Left = "left"
)

// Op is one operation of a sale's history: a request's input, its answer
// and when it was invoked and answered, on one clock.
type Op struct {
	Kind     string // Bought, SoldOutAnswer, LimitAnswer, Maybe, Restock, Returned, Waited, Allotted or Left
	User     string
	Qty      int64
	Key      string // Idempotency-Key, "" without one
	Instance string // which instance answered (restocks: the admin's)
	Client   int    // the caller (a k6 VU); one caller's operations never overlap
	Call     time.Time
	Return   time.Time
	Status   int   // HTTP status of the answer, 0 for a dropped connection
	OrderID  int64 // Bought: the order
	Stock    int64 // Restock: the remaining stock set
	// Resolved: an unknown outcome (503, dropped, timed out) decided from
	// the database; Return is then the end of the history.
	Resolved bool
}

func (o Op) String() string {
	var b strings.Builder
	switch o.Kind {
	case Restock:
		fmt.Fprintf(&b, "restock to %d", o.Stock)
	case Returned, Allotted, Left:
		fmt.Fprintf(&b, "%s's order %d %s %d", o.User, o.OrderID, o.Kind, o.Qty)
	default:
		fmt.Fprintf(&b, "%s bought %d → %s", o.User, o.Qty, o.Kind)
		if o.OrderID != 0 {
			fmt.Fprintf(&b, " (order %d)", o.OrderID)
		}
		if o.Resolved {
			b.WriteString(" (unknown outcome, resolved from the database)")
		} else {
			fmt.Fprintf(&b, " [%d]", o.Status)
		}
	}
	if o.Key != "" {
		fmt.Fprintf(&b, ", key %s", o.Key)
	}
	if o.Instance != "" {
		fmt.Fprintf(&b, ", instance %s", o.Instance)
	}
	fmt.Fprintf(&b, ", invoked %s answered %s", o.Call.Format("15:04:05.000"), o.Return.Format("15:04:05.000"))
	return b.String()
}

// History is one SKU's recorded operations.
type History struct {
	InitialStock int64
	PerUserLimit int64
	Ops          []Op
	// Resolution counts the unknown outcomes and how they were decided.
	Resolution Resolution
}

// Resolution counts the requests (a purchase and its retries with one key)
// left with an unknown outcome (503, dropped, timed out) and how they were
// decided: by a later attempt's answer (200 with the order) or by the
// database. An unknown attempt followed by a 201 did not buy and is not
// counted.
type Resolution struct {
	Unknown   int `json:"unknown"`   // requests whose answers said nothing of the outcome
	Happened  int `json:"happened"`  // the order exists: the purchase took place
	Dropped   int `json:"dropped"`   // no order: nothing happened, left out of the history
	Undecided int `json:"undecided"` // kept as Maybe: either way is accepted
}

// sortOps orders ops by invocation, for reports and the witness.
func sortOps(ops []Op) {
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call.Before(ops[j].Call) })
}

// ofKinds returns the operations of kind a and those of kind b, in order.
func ofKinds(ops []Op, a, b string) (as, bs []Op) {
	for _, op := range ops {
		switch op.Kind {
		case a:
			as = append(as, op)
		case b:
			bs = append(bs, op)
		}
	}
	return as, bs
}
