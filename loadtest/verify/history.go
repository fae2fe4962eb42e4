package verify

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Kinds of operation: the answers to an order request, and what changed
// the stock beside them, each at some moment within its interval.
const (
	Bought        = "bought"         // took Qty units: 201, a retry's 200 after a lost answer, or an unknown outcome whose order exists
	SoldOutAnswer = "sold_out"       // 409 sold_out
	LimitAnswer   = "limit_exceeded" // 409 limit_exceeded
	Maybe         = "maybe"          // an unknown outcome the database cannot decide: it may or may not have taken a unit
	Restock       = "restock"        // an admin PUT of the remaining stock
	Returned      = "returned"       // an order's units back to stock (a cancel, an expiry); its buyer's holdings fall by as much
	Waited        = "waited"         // 202: a waiting order, holding no unit but counting toward the limit
	Allotted      = "allotted"       // units that came back given to the buyer's waiting order
	Left          = "left"           // a waiting order left the line without units (lapsed, or cancelled)
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
	Resolved bool  // an unknown outcome decided from the database; Return is the end of the history
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
// left with an unknown outcome (503, dropped, timed out) and how a later
// answer (200 with the order) or the database decided them.
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
