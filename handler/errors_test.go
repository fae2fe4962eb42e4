package handler

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

// An order whose commit may have landed is never answered like a plain
// "nothing happened" 503: it has its own code, and Retry-After.
func TestFail_OutcomeUnknown(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil)
	// As the service passes it on: wrapped in ErrUnavailable.
	err := fmt.Errorf("%w: %w", service.ErrUnavailable, fmt.Errorf("%w: COMMIT failed", service.ErrOutcomeUnknown))
	fail(c, slog.New(slog.DiscardHandler), err)

	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusServiceUnavailable || body.Error.Code != codeOutcomeUnknown || rec.Header().Get("Retry-After") == "" {
		t.Errorf("fail(ErrOutcomeUnknown) = %d %q, Retry-After %q; want 503 %q with Retry-After", rec.Code, body.Error.Code, rec.Header().Get("Retry-After"), codeOutcomeUnknown)
	}
}

// Every refusal the API can give an order request is counted, in
// seckill_orders_total, under its own code: no answer of the contract
// falls into result="error", which is for bugs.
func TestErrorMap_EveryOrderAnswerCountedUnderItsCode(t *testing.T) {
	t.Parallel()
	notOrders := map[error]string{ // answers of other routes, never of placing an order
		service.ErrNotFound:       "an order or route looked up",
		service.ErrOrderPaid:      "cancel",
		service.ErrOrderCancelled: "pay or cancel",
		service.ErrOrderExpired:   "pay or cancel",
	}
	results := map[string]bool{}
	for _, r := range service.OrderResults {
		results[r] = true
	}
	for _, m := range errorMap {
		if _, skip := notOrders[m.err]; skip {
			continue
		}
		// As a batch answers it (bare) and as the service wraps it.
		for _, err := range []error{m.err, fmt.Errorf("%w: %w", service.ErrUnavailable, m.err)} {
			if m.err == service.ErrUnavailable {
				err = m.err
			}
			if got := service.ResultOf(err, false); got != m.code || !results[got] {
				t.Errorf("ResultOf(%v) = %q; want %q, the code the API answers, among service.OrderResults", err, got, m.code)
			}
		}
	}
}
