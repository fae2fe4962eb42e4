package handler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

// TestEveryListHasOneOpaqueCursor: the four lists page the same way:
// next_after is an opaque string (never a number, never an id a client
// could count with), passing it back as after gives the next page, and a
// bare id as after is a 400.
func TestEveryListHasOneOpaqueCursor(t *testing.T) {
	t.Parallel()
	s := newStack(t, withHS256(t))
	sku := s.createSKU(t, `{"name":"cursors","stock":10,"per_user_limit":5}`)
	s.createSKU(t, `{"name":"cursors-2","stock":1}`)
	alice := []string{"Authorization", "Bearer " + hs(t, "alice")}
	for range 2 {
		if r := s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku), alice...); r.status != http.StatusCreated {
			t.Fatalf("alice buys = %d %s", r.status, r.body)
		}
	}
	cursor := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	for _, l := range []struct {
		path    string
		headers []string
		items   string
	}{
		{"/api/v1/skus", nil, "skus"},
		{"/admin/v1/skus", bearer, "skus"},
		{"/api/v1/orders", alice, "orders"},
		{fmt.Sprintf("/admin/v1/skus/%d/orders", sku), bearer, "orders"},
	} {
		var first map[string]json.RawMessage
		r := s.get(t, l.path+"?limit=1", l.headers...)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s?limit=1 = %d %s", l.path, r.status, r.body)
		}
		r.json(t, &first)
		var next string
		if err := json.Unmarshal(first["next_after"], &next); err != nil || !cursor.MatchString(next) {
			t.Errorf("GET %s?limit=1: next_after %s; want an opaque string cursor", l.path, first["next_after"])
			continue
		}
		second := s.get(t, l.path+"?limit=1&after="+next, l.headers...)
		var page map[string]json.RawMessage
		second.json(t, &page)
		if second.status != http.StatusOK || string(firstItem(t, page, l.items)) == string(firstItem(t, first, l.items)) {
			t.Errorf("GET %s?after=<next_after> = %d %s; want the next %s", l.path, second.status, second.body, l.items)
		}
		if r := s.get(t, l.path+"?after="+strconv.Itoa(1), l.headers...); r.status != http.StatusBadRequest || r.code != "invalid_request" {
			t.Errorf("GET %s?after=1 = %d %q; want 400 invalid_request (a cursor, not an id)", l.path, r.status, r.code)
		}
	}
}

func firstItem(t *testing.T, page map[string]json.RawMessage, items string) json.RawMessage {
	t.Helper()
	var list []json.RawMessage
	if err := json.Unmarshal(page[items], &list); err != nil || len(list) == 0 {
		t.Fatalf("page %s: no %s", page[items], items)
	}
	return list[0]
}
