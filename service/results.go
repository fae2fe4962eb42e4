package service

// OrderResults lists every result an order request can be counted under:
// what ResultOf names, and what the API refuses before the order flow sees
// the request (RefusedResults). Dashboards need each series to exist, at
// 0, from the start.
var OrderResults = append([]string{
	"created", "replayed", "sold_out", "insufficient_stock", "limit_exceeded",
	"sale_not_active", "idempotency_conflict", "sku_not_found", "busy",
	"unavailable", "outcome_unknown", "invalid", "error",
}, RefusedResults...)

// RefusedResults are the results of order requests the API answers without
// calling Place: a body too large or not JSON, a rate limit.
var RefusedResults = []string{"too_large", "unsupported_media_type", "rate_limited"}

// Refused counts an order request the API answered without calling Place
// (result is one of OrderResults), so that every answered request is counted once.
func (o *Orders) Refused(result string) { o.obs.OrderResult(result) }
