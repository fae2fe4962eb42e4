package handler

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

// singleQuery refuses a query string that does not parse or that gives a
// parameter more than once: which of two values the API would take is a
// guess no client should depend on.
func singleQuery() gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.URL.RawQuery == "" {
			c.Next()
			return
		}
		q, err := url.ParseQuery(c.Request.URL.RawQuery)
		if err != nil {
			abort(c, http.StatusBadRequest, codeInvalid, "the query string is malformed: "+err.Error())
			return
		}
		for name, vals := range q {
			if len(vals) > 1 {
				abort(c, http.StatusBadRequest, codeInvalid, fmt.Sprintf("query parameter %q is given %d times; give it once", name, len(vals)))
				return
			}
		}
		c.Next()
	}
}

// Observer counts what the API answers (metrics.Metrics is one).
type Observer interface {
	// Request counts an answered request by route template ("unmatched"
	// for none: raw paths would explode the series) and status.
	Request(route string, status int, took time.Duration)
	// OrderResult counts an order request the handler answered itself
	// under its result (RefusedResults, or service.ResultOf's "invalid").
	OrderResult(result string)
}

// refusedResults are what an order request the handler answers itself
// counts under, by status; any other status counts as invalid.
var refusedResults = map[int]string{
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusTooManyRequests:       "rate_limited",
}

// RefusedResults lists what an order request the handler answers itself
// counts under, beside service.OrderResults.
func RefusedResults() []string {
	out := slices.Collect(maps.Values(refusedResults))
	slices.Sort(out)
	return out
}

// observe counts and times every request by route template, and counts
// the POST /api/v1/orders answers given before the order flow saw the
// request (a bad body, a rate limit), so that seckill_orders_total counts
// every answered order request once.
func observe(obs Observer) gin.HandlerFunc {
	invalid := service.ResultOf(service.ErrInvalid, false)
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route, status := c.FullPath(), c.Writer.Status()
		if route == "" {
			route = "unmatched"
		}
		obs.Request(route, status, time.Since(start))
		if route != "/api/v1/orders" || c.Request.Method != http.MethodPost || answerOf(c).placed {
			return
		}
		if r, ok := refusedResults[status]; ok {
			obs.OrderResult(r)
		} else {
			obs.OrderResult(invalid)
		}
	}
}

// notFound answers an unknown route; a trailing slash is named, since
// the API does not redirect (a redirect would not be JSON).
func notFound(c *gin.Context) {
	msg := "no such route"
	if p := c.Request.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		msg = "no such route; remove the trailing slash"
	}
	abort(c, http.StatusNotFound, codeNotFound, msg)
}

// answer is what a request's handlers tell the middleware around them
// (the access log, the metrics, the trace) of its answer. requestID puts
// one in every request's context, in place of Gin's c.Set, whose map a
// sold-out refusal paid for (330 bytes a request).
type answer struct {
	code    string // the JSON error code of an error answer
	outcome string // the outcome the route named (an order's created, replayed, waiting)
	placed  bool   // the order flow counted the answer (seckill_orders_total)
}

type answerKey struct{}

// answerOf returns c's answer record; without one (a context requestID
// did not make), a new one that nothing reads.
func answerOf(c *gin.Context) *answer {
	if a, ok := c.Request.Context().Value(answerKey{}).(*answer); ok {
		return a
	}
	return &answer{}
}
