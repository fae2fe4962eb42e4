package handler

import (
	"log/slog"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/logging"
	"github.com/seckill/seckill/service"
)

// errorBody is every error answer:
// {"error":{"code":"...","message":"...","request_id":"...","trace_id":"..."}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// RequestID is the request's X-Request-ID, the key to its log lines.
	RequestID string `json:"request_id,omitempty"`
	// TraceID is the request's trace (32 hex digits), present only when
	// the trace was recorded (OTEL_*; docs/operations.md).
	TraceID string `json:"trace_id,omitempty"`
}

// Stable error codes of the handler's own answers; the domain's are in
// service.Results.
const (
	codeInvalid          = "invalid_request"
	codeTooLarge         = "request_too_large"
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeUnsupportedMedia = "unsupported_media_type"
	codeRateLimited      = "rate_limited"
	codeMethodNotAllowed = "method_not_allowed"
)

// statusOf is the HTTP status of each kind of service.Results: the one
// place where domain errors become HTTP.
var statusOf = map[service.Kind]int{
	service.KindInvalid:     http.StatusBadRequest,
	service.KindNotFound:    http.StatusNotFound,
	service.KindConflict:    http.StatusConflict,
	service.KindBusy:        http.StatusTooManyRequests,
	service.KindUnavailable: http.StatusServiceUnavailable,
	service.KindInternal:    http.StatusInternalServerError,
}

// unavailableKeyed is the 503 message of a request that carried an
// Idempotency-Key: retrying with it is safe whatever happened.
const unavailableKeyed = "the service cannot complete this now; retry after Retry-After seconds with the same Idempotency-Key and body"

// fail writes err as the API's error body: its row of service.Results,
// with that kind's status. Errors of no row are logged once with their
// cause and answered 500 without details.
func fail(c *gin.Context, log *slog.Logger, err error) {
	r := service.Refusal(err)
	status, msg := statusOf[r.Kind], r.Message
	switch r.Kind {
	case service.KindInvalid:
		msg = err.Error() // written for clients
	case service.KindBusy:
		c.Header("Retry-After", "1")
	case service.KindUnavailable:
		c.Header("Retry-After", "1")
		log.WarnContext(c.Request.Context(), "request unavailable", "path", c.FullPath(), "err", err)
		if c.Request.Header.Get("Idempotency-Key") != "" {
			msg = unavailableKeyed
		}
	case service.KindInternal:
		log.ErrorContext(c.Request.Context(), "internal error", "path", c.FullPath(), "err", err)
	}
	abort(c, status, r.Code, msg)
}

// abort answers with an errorBody, written byte for byte as
// encoding/json writes it (FuzzAppendError) without its reflection: a
// sold-out refusal is most of a sale's answers.
func abort(c *gin.Context, status int, code, message string) {
	answerOf(c).code = code
	c.Abort()
	requestID, traceID := logging.IDs(c.Request.Context())
	buf := errorBuffers.Get().(*[]byte)
	*buf = appendError((*buf)[:0], code, message, requestID, traceID)
	writeJSON(c, status, *buf) // the writer copies it
	// A rare long message does not stay pooled.
	if cap(*buf) <= 4<<10 {
		errorBuffers.Put(buf)
	}
}

// errorBuffers holds abort's bodies.
var errorBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// appendError appends errorBody{errorDetail{code, message, requestID, traceID}}'s JSON.
func appendError(b []byte, code, message, requestID, traceID string) []byte {
	b = append(b, `{"error":{"code":`...)
	b = appendString(b, code)
	b = append(b, `,"message":`...)
	b = appendString(b, message)
	if requestID != "" {
		b = append(b, `,"request_id":`...)
		b = appendString(b, requestID)
	}
	if traceID != "" {
		b = append(b, `,"trace_id":`...)
		b = appendString(b, traceID)
	}
	return append(b, "}}"...)
}
