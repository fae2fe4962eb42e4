package service

import "errors"

// A Kind is what sort of refusal an error is; the API turns each into one
// HTTP status.
type Kind int

// The kinds of Results.
const (
	KindInvalid     Kind = iota + 1 // the request can never succeed as sent
	KindNotFound                    // what it names does not exist
	KindConflict                    // the state refuses it: sold out, over the limit, already paid
	KindBusy                        // too many are waiting: retry shortly
	KindUnavailable                 // a dependency failed: retry, nothing was lost
	KindInternal                    // a bug, never the client's doing
)

// A Result is one way the domain refuses a request, as clients and
// dashboards see it.
type Result struct {
	Err  error
	Kind Kind
	// Code is the stable code of the error answer, which clients branch on.
	Code string
	// Message is what clients read; "" for the error's own text, written
	// for them (ErrInvalid).
	Message string
	// Order is what an order request so refused counts under in
	// seckill_orders_total; "" where placing an order never ends so.
	Order string
}

// Results is the one table of the domain's refusals, each sentinel once
// (TestResults_EverySentinelOnce): the handler derives its statuses from
// the kinds, the metrics their labels from Order. The first row whose Err
// an error wraps is its result (Refusal), so ErrOutcomeUnknown comes
// before ErrUnavailable, which may wrap it.
var Results = []Result{
	{ErrInvalid, KindInvalid, "invalid_request", "", "invalid"},
	{ErrSKUNotFound, KindNotFound, "sku_not_found", "no such sku", "sku_not_found"},
	{ErrNotFound, KindNotFound, "not_found", "not found", ""},
	{ErrSoldOut, KindConflict, "sold_out", "the sku is sold out", "sold_out"},
	{ErrInsufficientStock, KindConflict, "insufficient_stock", "fewer units are left than the quantity asked for; see the sku's stock and ask for fewer", "insufficient_stock"},
	{ErrLimitExceeded, KindConflict, "limit_exceeded", "this order would take the user over the sku's per_user_limit; see the sku and ask for fewer", "limit_exceeded"},
	{ErrSaleNotActive, KindConflict, "sale_not_active", "the sale of this sku is not open now", "sale_not_active"},
	{ErrIdempotencyConflict, KindConflict, "idempotency_conflict", "this Idempotency-Key was used with a different request", "idempotency_conflict"},
	{ErrOrderPaid, KindConflict, "order_paid", "the order is paid: it can no longer be cancelled", ""},
	{ErrOrderCancelled, KindConflict, "order_cancelled", "the order was cancelled: its units went back to the sale; nothing was changed", ""},
	{ErrOrderExpired, KindConflict, "order_expired", "the order expired unpaid: its units went back to the sale; nothing was changed", ""},
	{ErrWaitlistFull, KindConflict, "waitlist_full", "the sku's waitlist is full (order.waitlist_max waiting orders); retry later, or without wait", "waitlist_full"},
	{ErrAlreadyWaiting, KindConflict, "already_waiting", "this buyer already has a waiting order of this sku: one at most; cancel it to ask for another quantity", "already_waiting"},
	{ErrOrderWaiting, KindConflict, "order_waiting", "the order is waiting for units to come back: there is nothing to pay yet; nothing was changed", ""},
	{ErrOrderLapsed, KindConflict, "order_lapsed", "the order waited until the sale ended without units coming back; nothing was changed", ""},
	{ErrBusy, KindBusy, "busy", "too many buyers are waiting for this sku; retry shortly", "busy"},
	{ErrTooManySKUs, KindBusy, "busy", "this instance has buyers waiting for too many skus; retry shortly", "busy"},
	{ErrTooManyPolls, KindUnavailable, "unavailable", "this instance holds as many long-polls as it may (order.long_polls_max); retry after Retry-After seconds, or read without Prefer: wait", ""},
	{ErrOutcomeUnknown, KindUnavailable, "outcome_unknown", "it may or may not have been done: look it up, or send the same request again (with the same Idempotency-Key for an order)", "outcome_unknown"},
	{ErrUnavailable, KindUnavailable, "unavailable", "the service cannot complete this now; retry after Retry-After seconds", "unavailable"},
	// The order flow's own: each is handled (retried, or passed on wrapped
	// in one above) before a client could see it.
	internal(ErrConflict),
	internal(ErrStaleFence),
	internal(ErrNoTransaction),
	internal(ErrLockUnavailable),
	internal(ErrLockBusy),
	internal(ErrNotReplicated),
}

// Internal is the result of an error of no row: a bug's.
var Internal = Result{Kind: KindInternal, Code: "internal", Message: "internal error", Order: "error"}

func internal(err error) Result {
	r := Internal
	r.Err = err
	return r
}

// The results of an order request that placed or found its order.
const (
	ResultCreated  = "created"
	ResultReplayed = "replayed"
	ResultWaiting  = "waiting" // created waiting for units (waitlist.go)
)

// Refusal returns err's row of Results, or Internal.
func Refusal(err error) Result {
	for _, r := range Results { // the sentinels themselves, most refusals, without errors.Is's walk
		if err == r.Err {
			return r
		}
	}
	for _, r := range Results {
		if errors.Is(err, r.Err) {
			return r
		}
	}
	return Internal
}

// ResultOf names the outcome of an order for metrics and logs.
func ResultOf(err error, created bool) string {
	switch {
	case err == nil && created:
		return ResultCreated
	case err == nil:
		return ResultReplayed
	}
	if r := Refusal(err); r.Order != "" {
		return r.Order
	}
	return Internal.Order
}

// ResultOfPlaced is ResultOf for Place's answer: an order created
// waiting counts as ResultWaiting.
func ResultOfPlaced(p Placed, err error) string {
	if err == nil && p.Created && p.Order.Status == OrderWaiting {
		return ResultWaiting
	}
	return ResultOf(err, p.Created)
}

// OrderResults lists every result placing an order counts under, each
// once: dashboards need each series to exist, at 0, from the start.
func OrderResults() []string {
	out := []string{ResultCreated, ResultReplayed, ResultWaiting}
	seen := map[string]bool{}
	for _, r := range append(Results[:len(Results):len(Results)], Internal) {
		if r.Order != "" && !seen[r.Order] {
			seen[r.Order] = true
			out = append(out, r.Order)
		}
	}
	return out
}
