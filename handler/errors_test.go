package handler

import (
	"encoding/json"
	"errors"
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
	if rec.Code != http.StatusServiceUnavailable || body.Error.Code != "outcome_unknown" || rec.Header().Get("Retry-After") == "" {
		t.Errorf("fail(ErrOutcomeUnknown) = %d %q, Retry-After %q; want 503 outcome_unknown with Retry-After", rec.Code, body.Error.Code, rec.Header().Get("Retry-After"))
	}
}

// Every row of service.Results becomes its own code with a status of its
// kind, as the domain gives it (bare) and as the order flow passes it on
// (wrapped in ErrUnavailable); an error of no row is a 500.
func TestFail_EveryResultHasAStatus(t *testing.T) {
	t.Parallel()
	for _, r := range service.Results {
		status, ok := statusOf[r.Kind]
		if !ok || status < 400 {
			t.Errorf("%v: kind %d has no error status (%d)", r.Err, r.Kind, status)
			continue
		}
		for _, err := range []error{r.Err, fmt.Errorf("%w: %w", service.ErrUnavailable, r.Err)} {
			if r.Kind == service.KindInternal && err != r.Err {
				continue // the order flow's own: a 503 when wrapped, as it should
			}
			rec := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(rec)
			c.Request = httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil)
			fail(c, slog.New(slog.DiscardHandler), err)
			var body errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if rec.Code != status || body.Error.Code != r.Code {
				t.Errorf("fail(%v) = %d %q; want %d %q", err, rec.Code, body.Error.Code, status, r.Code)
			}
		}
	}
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodGet, "/api/v1/orders/1", nil)
	fail(c, slog.New(slog.DiscardHandler), errors.New("a bug"))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("fail(a bug) = %d; want 500", rec.Code)
	}
}
