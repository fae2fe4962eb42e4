package handler

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// net/http trims a header value's surrounding white space before the
// handler sees it; a request built otherwise (another server, a proxy in
// process) still must not bring a key that differs from another only by
// spaces at its ends.
func TestIdempotencyKey_RefusesSurroundingSpaces(t *testing.T) {
	t.Parallel()
	for _, key := range []string{" k", "k ", " "} {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil)
		c.Request.Header["Idempotency-Key"] = []string{key}
		if got, ok := idempotencyKey(c); ok || w.Code != http.StatusBadRequest {
			t.Errorf("idempotencyKey(%q) = %q, %v with status %d; want refused with 400", key, got, ok, w.Code)
		}
	}
}
