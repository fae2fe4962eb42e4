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
