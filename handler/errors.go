package handler

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/logging"
	"github.com/seckill/seckill/service"
)

// errorBody is every error answer:
// {"error":{"code":"...","message":"...","request_id":"..."}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// RequestID is the request's X-Request-ID, the key to its log lines.
	RequestID string `json:"request_id,omitempty"`
}

// Stable error codes of the API.
const (
	codeInvalid             = "invalid_request"
	codeTooLarge            = "request_too_large"
	codeUnauthorized        = "unauthorized"
	codeNotFound            = "not_found"
	codeSKUNotFound         = "sku_not_found"
	codeSoldOut             = "sold_out"
	codeInsufficientStock   = "insufficient_stock"
	codeUnsupportedMedia    = "unsupported_media_type"
	codeLimitExceeded       = "limit_exceeded"
	codeSaleNotActive       = "sale_not_active"
	codeIdempotencyConflict = "idempotency_conflict"
	codeBusy                = "busy"
	codeRateLimited         = "rate_limited"
	codeUnavailable         = "unavailable"
	codeOutcomeUnknown      = "outcome_unknown"
	codeInternal            = "internal"
	codeMethodNotAllowed    = "method_not_allowed"
	codeOrderPaid           = "order_paid"
	codeOrderCancelled      = "order_cancelled"
	codeOrderExpired        = "order_expired"
)

// errorMap is the one place where domain errors become HTTP: sentinel →
// status, stable code and the message clients see.
var errorMap = []struct {
	err     error
	status  int
	code    string
	message string
}{
	{service.ErrSKUNotFound, http.StatusNotFound, codeSKUNotFound, "no such sku"},
	{service.ErrNotFound, http.StatusNotFound, codeNotFound, "not found"},
	{service.ErrSoldOut, http.StatusConflict, codeSoldOut, "the sku is sold out"},
	{service.ErrInsufficientStock, http.StatusConflict, codeInsufficientStock, "fewer units are left than the quantity asked for; see the sku's stock and ask for fewer"},
	{service.ErrLimitExceeded, http.StatusConflict, codeLimitExceeded, "this order would take the user over the sku's per_user_limit; see the sku and ask for fewer"},
	{service.ErrSaleNotActive, http.StatusConflict, codeSaleNotActive, "the sale of this sku is not open now"},
	{service.ErrIdempotencyConflict, http.StatusConflict, codeIdempotencyConflict, "this Idempotency-Key was used with a different request"},
	{service.ErrOrderPaid, http.StatusConflict, codeOrderPaid, "the order is paid: it can no longer be cancelled"},
	{service.ErrOrderCancelled, http.StatusConflict, codeOrderCancelled, "the order was cancelled: its units went back to the sale; nothing was changed"},
	{service.ErrOrderExpired, http.StatusConflict, codeOrderExpired, "the order expired unpaid: its units went back to the sale; nothing was changed"},
	{service.ErrBusy, http.StatusTooManyRequests, codeBusy, "too many buyers are waiting for this sku; retry shortly"},
	{service.ErrTooManySKUs, http.StatusTooManyRequests, codeBusy, "this instance has buyers waiting for too many skus; retry shortly"},
	{service.ErrOutcomeUnknown, http.StatusServiceUnavailable, codeOutcomeUnknown, "the order may or may not have been placed: look it up, or retry with the same Idempotency-Key if the request carried one"},
	{service.ErrUnavailable, http.StatusServiceUnavailable, codeUnavailable, "the service cannot complete this now; retry after Retry-After seconds"},
}

// unavailableKeyed is the 503 message of a request that carried an
// Idempotency-Key: retrying with it is safe whatever happened.
const unavailableKeyed = "the service cannot complete this now; retry after Retry-After seconds with the same Idempotency-Key and body"

// fail writes err as the API's error body. ErrInvalid carries its own
// message (written for clients); unknown errors are logged once with their
// cause and answered 500 without details.
func fail(c *gin.Context, log *slog.Logger, err error) {
	if errors.Is(err, service.ErrInvalid) {
		abort(c, http.StatusBadRequest, codeInvalid, err.Error())
		return
	}
	for _, m := range errorMap {
		if errors.Is(err, m.err) {
			if m.status == http.StatusTooManyRequests || m.status == http.StatusServiceUnavailable {
				c.Header("Retry-After", "1")
			}
			if m.status == http.StatusServiceUnavailable {
				log.WarnContext(c.Request.Context(), "request unavailable", "path", c.FullPath(), "err", err)
			}
			msg := m.message
			if m.status == http.StatusServiceUnavailable && c.Request.Header.Get("Idempotency-Key") != "" {
				msg = unavailableKeyed
			}
			abort(c, m.status, m.code, msg)
			return
		}
	}
	log.ErrorContext(c.Request.Context(), "internal error", "path", c.FullPath(), "err", err)
	abort(c, http.StatusInternalServerError, codeInternal, "internal error")
}

// errorCodeKey holds the code of the request's error answer, for the
// access log.
const errorCodeKey = "seckill.error_code"

func abort(c *gin.Context, status int, code, message string) {
	c.Set(errorCodeKey, code)
	c.AbortWithStatusJSON(status, errorBody{errorDetail{Code: code, Message: message,
		RequestID: logging.RequestID(c.Request.Context())}})
}
