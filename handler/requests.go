package handler

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
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

// placeCalled marks a request whose answer the order flow counted.
const placeCalled = "seckill.place_called"

// countRefusedOrders counts the POST /api/v1/orders answers given before
// the order flow saw the request (a bad body, a rate limit), so that
// seckill_orders_total counts every answered order request once.
func countRefusedOrders(orders Orders) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		if orders == nil || c.Request.Method != http.MethodPost || c.FullPath() != "/api/v1/orders" || c.GetBool(placeCalled) {
			return
		}
		switch c.Writer.Status() {
		case http.StatusRequestEntityTooLarge:
			orders.Refused("too_large")
		case http.StatusUnsupportedMediaType:
			orders.Refused("unsupported_media_type")
		case http.StatusTooManyRequests:
			orders.Refused("rate_limited")
		default:
			orders.Refused("invalid")
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
