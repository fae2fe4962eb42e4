package handler

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/logging"
)

// Tracer starts the span of each request (app/tracing.go fills it with
// OpenTelemetry, configured by the OTEL_* variables). With none
// (Config.Tracer nil) no middleware runs: an untraced service pays
// nothing for tracing.
type Tracer interface {
	// Start begins the span of a request to route (its template, or
	// "unmatched"), continuing the trace of the W3C traceparent in
	// header, else a new one. It returns ctx carrying the span when the
	// span is recorded, else ctx itself, and the span.
	Start(ctx context.Context, method, route string, header http.Header) (context.Context, Span)
}

// Span is a request's span.
type Span interface {
	// TraceID is the trace's ID in 32 hex digits when the span is
	// recorded (sampled), else "": an ID the backend will not have is
	// no key to anything.
	TraceID() string
	// End ends the span with the request's answer: its status and, for
	// an error answer, its code.
	End(status int, code string)
}

// traced runs every request inside its span: the trace ID goes into the
// context, so that the access log line and an error body carry it
// beside the request ID.
func traced(t Tracer) gin.HandlerFunc {
	return func(c *gin.Context) {
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		ctx, span := t.Start(c.Request.Context(), c.Request.Method, route, c.Request.Header)
		if id := span.TraceID(); id != "" { // recorded: else ctx is the request's own, and no copy of it is made
			c.Request = c.Request.WithContext(logging.WithTraceID(ctx, id))
		}
		c.Next()
		span.End(c.Writer.Status(), answerOf(c).code)
	}
}
