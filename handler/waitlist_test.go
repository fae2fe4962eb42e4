package handler_test

import (
	"net/http"
	"strconv"
	"testing"
)

// TestWaitlist_Answers: "wait": true on a sold-out SKU answers 202 with
// the waiting order, its Location and position; the same key again 200
// with that order; past order.waitlist_max 409 waitlist_full; a "wait"
// that is no boolean 400; the buyer's cancel leaves the line, and the
// place it left is taken by the next to ask.
func TestWaitlist_Answers(t *testing.T) {
	t.Parallel()
	s := newStack(t, func(o *stackOptions) { o.waitlistMax = 2 })
	sku := s.createSKU(t, `{"name":"second act","stock":1,"per_user_limit":2}`)
	s.buy(t, sku, "first", 1, "")

	w0 := s.wait(t, sku, "w0", 2, "w0-key", 0)
	if w0.Quantity != 2 || w0.UserID != "w0" || w0.ExpiresAt != nil || w0.AllocatedAt != nil {
		t.Errorf("waiting order = %+v; want w0's 2 units, no expiry (the sale has no end), not allocated", w0)
	}
	body := `{"sku_id":` + strconv.FormatInt(sku, 10) + `,"user_id":"w0","quantity":2,"wait":true}`
	r := s.call(t, http.MethodPost, "/api/v1/orders", body, "Idempotency-Key", "w0-key")
	var again waitingOrder
	if r.status == http.StatusOK {
		r.json(t, &again)
	}
	if r.status != http.StatusOK || again.OrderID != w0.OrderID || again.Status != "waiting" || again.Position != nil {
		t.Errorf("replay = %d %s; want 200 with the same waiting order", r.status, r.body)
	}
	s.wait(t, sku, "w1", 1, "", 1)
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"sku_id":` + strconv.FormatInt(sku, 10) + `,"user_id":"w2","quantity":1,"wait":true}`, http.StatusConflict, "waitlist_full"},
		{`{"sku_id":` + strconv.FormatInt(sku, 10) + `,"user_id":"w2","quantity":1}`, http.StatusConflict, "sold_out"},
		{`{"sku_id":` + strconv.FormatInt(sku, 10) + `,"user_id":"w2","quantity":1,"wait":"true"}`, http.StatusBadRequest, "invalid_request"},
		{`{"sku_id":` + strconv.FormatInt(sku, 10) + `,"user_id":"w2","quantity":1,"wait":[true]}`, http.StatusBadRequest, "invalid_request"},
		{`{"sku_id":` + strconv.FormatInt(sku, 10) + `,"user_id":"w2","quantity":1,"wait":true,"wait":false}`, http.StatusBadRequest, "invalid_request"},
		{`{"sku_id":` + strconv.FormatInt(sku, 10) + `,"user_id":"w2","quantity":3,"wait":true}`, http.StatusConflict, "limit_exceeded"},
	} {
		if r := s.call(t, http.MethodPost, "/api/v1/orders", tc.body); r.status != tc.status || r.code != tc.code {
			t.Errorf("POST %s = %d %q; want %d %q", tc.body, r.status, r.code, tc.status, tc.code)
		}
	}
	if r := s.call(t, http.MethodPost, "/api/v1/orders/"+w0.OrderID+"/cancel", ""); r.status != http.StatusOK {
		t.Fatalf("cancel of the waiting order = %d %s; want 200", r.status, r.body)
	}
	s.wait(t, sku, "w2", 1, "", 1) // w1 is ahead
}
