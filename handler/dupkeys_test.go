package handler_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestDuplicateKeysAreRefused: a body with a member given twice is a 400
// naming it, on every route that reads a body, and changes nothing (no
// order, the SKU as it was), as a query parameter given twice already is.
func TestDuplicateKeysAreRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"dup","stock":5,"per_user_limit":5}`)
	id := strconv.FormatInt(sku, 10)
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"u-1","quantity":1,"quantity":2}`, sku)},
		{http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"u-1","quantity":1,"Quantity":2}`, sku)},
		{http.MethodPost, "/admin/v1/skus", `{"name":"a","stock":1,"stock":1000}`},
		{http.MethodPatch, "/admin/v1/skus/" + id, `{"name":"b","name":"c"}`},
		{http.MethodPut, "/admin/v1/skus/" + id + "/stock", `{"stock":1,"stock":9}`},
	} {
		r := s.call(t, tc.method, tc.path, tc.body, bearer...)
		if r.status != http.StatusBadRequest || r.code != "invalid_request" || !strings.Contains(string(r.body), "more than once") {
			t.Errorf("%s %s %s = %d %s; want 400 invalid_request, given more than once", tc.method, tc.path, tc.body, r.status, r.body)
		}
	}
	r := s.get(t, "/admin/v1/skus/"+id, bearer...)
	if !strings.Contains(string(r.body), `"name":"dup"`) || !strings.Contains(string(r.body), `"stock":5`) || !strings.Contains(string(r.body), `"sold":0`) {
		t.Errorf("the SKU after the refused bodies = %s; want it as created: dup, stock 5, sold 0", r.body)
	}
	if r := s.get(t, "/admin/v1/skus", bearer...); strings.Count(string(r.body), `"id"`) != 1 {
		t.Errorf("GET /admin/v1/skus = %s; want the one SKU (no SKU created from a refused body)", r.body)
	}
}
