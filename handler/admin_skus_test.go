package handler_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAdminListSKUs(t *testing.T) {
	t.Parallel()
	s := newStack(t) // a database of its own: the only SKUs are these
	var ids []int64
	for i := range 3 {
		ids = append(ids, s.createSKU(t, fmt.Sprintf(`{"name":"list-%d","stock":%d}`, i, i)))
	}
	type page struct {
		SKUs      []adminSKU `json:"skus"`
		NextAfter *string    `json:"next_after"`
	}
	// cursor is the next_after of the first page of limit SKUs.
	cursor := func(limit int) string {
		var p page
		s.get(t, "/admin/v1/skus?limit="+strconv.Itoa(limit), bearer...).json(t, &p)
		if p.NextAfter == nil {
			t.Fatalf("GET /admin/v1/skus?limit=%d: next_after null; want a cursor", limit)
		}
		return *p.NextAfter
	}
	after1, after2 := cursor(2), cursor(3) // after ids[1], after ids[2]
	tests := []struct {
		name, query string
		status      int
		want        []int64
		next        string // "" for null
	}{
		{"default page", "", 200, ids, ""},
		{"first page of two", "?limit=2", 200, ids[:2], after1},
		{"after the first page", "?limit=2&after=" + after1, 200, ids[2:], ""},
		{"a full last page still names next_after", "?limit=1&after=" + after1, 200, ids[2:], after2},
		{"past the end", "?after=" + after2, 200, nil, ""},
		{"limit 1000", "?limit=1000", 200, ids, ""},
		{"limit 0", "?limit=0", 400, nil, ""},
		{"limit 1001", "?limit=1001", 400, nil, ""},
		{"limit not a number", "?limit=ten", 400, nil, ""},
		{"limit empty", "?limit=", 400, nil, ""},
		{"after negative", "?after=-1", 400, nil, ""},
		{"after a bare id", "?after=" + strconv.FormatInt(ids[1], 10), 400, nil, ""},
		{"after empty", "?after=", 400, nil, ""},
		{"after altered", "?after=" + altered(after1), 400, nil, ""},
		{"limit given twice", "?limit=1&limit=2", 400, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.get(t, "/admin/v1/skus"+tc.query, bearer...)
			if r.status != tc.status {
				t.Fatalf("GET /admin/v1/skus%s = %d %s; want %d", tc.query, r.status, r.body, tc.status)
			}
			if r.status != 200 {
				return
			}
			var p page
			r.json(t, &p)
			var got []int64
			for _, sku := range p.SKUs {
				got = append(got, sku.ID)
			}
			next := ""
			if p.NextAfter != nil {
				next = *p.NextAfter
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || next != tc.next {
				t.Errorf("GET /admin/v1/skus%s = ids %v next_after %q; want %v next_after %q", tc.query, got, next, tc.want, tc.next)
			}
		})
	}
	if r := s.get(t, "/admin/v1/skus"); r.status != http.StatusUnauthorized {
		t.Errorf("GET /admin/v1/skus without a token = %d; want 401", r.status)
	}
}

func TestLocationOfCreated(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := s.call(t, http.MethodPost, "/admin/v1/skus", `{"name":"loc","stock":2}`, bearer...)
	var sku adminSKU
	r.json(t, &sku)
	if loc := r.header.Get("Location"); r.status != 201 || loc != "/admin/v1/skus/"+strconv.FormatInt(sku.ID, 10) {
		t.Fatalf("POST /admin/v1/skus = %d, Location %q; want 201 and the SKU's URL", r.status, loc)
	}
	if g := s.get(t, r.header.Get("Location"), bearer...); g.status != 200 {
		t.Errorf("GET Location = %d; want 200", g.status)
	}
	o := s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"u","quantity":1}`, sku.ID), "Idempotency-Key", "loc-1")
	var ord order
	o.json(t, &ord)
	if loc := o.header.Get("Location"); o.status != 201 || loc != "/api/v1/orders/"+ord.OrderID {
		t.Fatalf("POST /api/v1/orders = %d, Location %q; want 201 and the order's URL", o.status, loc)
	}
	if g := s.get(t, o.header.Get("Location")); g.status != 200 {
		t.Errorf("GET Location = %d; want 200", g.status)
	}
	// A replay created nothing (200) but answers the same order: the same Location.
	o = s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"u","quantity":1}`, sku.ID), "Idempotency-Key", "loc-1")
	if o.status != 200 || o.header.Get("Location") != "/api/v1/orders/"+ord.OrderID {
		t.Errorf("replay = %d, Location %q; want 200 and /api/v1/orders/%s", o.status, o.header.Get("Location"), ord.OrderID)
	}
	// So does a read of it.
	if g := s.get(t, "/api/v1/orders/"+ord.OrderID); g.status != 200 || g.header.Get("Location") != "/api/v1/orders/"+ord.OrderID {
		t.Errorf("GET the order = %d, Location %q; want 200 and its URL", g.status, g.header.Get("Location"))
	}
}

func TestAdminUpdateSKU(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	tests := []struct {
		name   string
		sku    string // the create body
		body   string
		status int
		code   string
		check  func(t *testing.T, got adminSKU)
	}{
		{name: "name", body: `{"name":"renamed"}`, status: 200, check: func(t *testing.T, got adminSKU) {
			if got.Name != "renamed" || got.PerUserLimit != 2 {
				t.Errorf("got %+v; want the name changed, the limit kept", got)
			}
		}},
		{name: "limit", body: `{"per_user_limit":5}`, status: 200, check: func(t *testing.T, got adminSKU) {
			if got.PerUserLimit != 5 || got.Name != "patch" {
				t.Errorf("got %+v; want limit 5, the name kept", got)
			}
		}},
		{name: "window set", body: `{"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00+08:00"}`, status: 200, check: func(t *testing.T, got adminSKU) {
			if got.StartsAt == nil || !got.StartsAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) || got.EndsAt == nil || !got.EndsAt.Equal(time.Date(2030, 1, 1, 16, 0, 0, 0, time.UTC)) {
				t.Errorf("got window %v–%v; want 2030-01-01T00:00Z–2030-01-01T16:00Z", got.StartsAt, got.EndsAt)
			}
		}},
		{name: "window cleared", sku: `{"name":"patch","stock":5,"per_user_limit":2,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`, body: `{"starts_at":null,"ends_at":null}`, status: 200, check: func(t *testing.T, got adminSKU) {
			if got.StartsAt != nil || got.EndsAt != nil {
				t.Errorf("got window %v–%v; want none", got.StartsAt, got.EndsAt)
			}
		}},
		{name: "one bound kept", sku: `{"name":"patch","stock":5,"starts_at":"2030-01-01T00:00:00Z"}`, body: `{"ends_at":"2030-02-01T00:00:00Z"}`, status: 200, check: func(t *testing.T, got adminSKU) {
			if got.StartsAt == nil || got.EndsAt == nil {
				t.Errorf("got window %v–%v; want both bounds", got.StartsAt, got.EndsAt)
			}
		}},
		{name: "window empty against the kept bound", sku: `{"name":"patch","stock":5,"starts_at":"` + at(time.Hour) + `"}`, body: `{"ends_at":"` + at(-time.Hour) + `"}`, status: 400, code: "invalid_request"},
		{name: "nothing to change", body: `{}`, status: 400, code: "invalid_request"},
		{name: "blank name", body: `{"name":"  "}`, status: 400, code: "invalid_request"},
		{name: "limit zero", body: `{"per_user_limit":0}`, status: 400, code: "invalid_request"},
		{name: "limit above 2^30", body: `{"per_user_limit":1073741825}`, status: 400, code: "invalid_request"},
		{name: "stock is not edited here", body: `{"stock":3}`, status: 400, code: "invalid_request"},
		{name: "time not RFC 3339", body: `{"ends_at":"next week"}`, status: 400, code: "invalid_request"},
		{name: "null body", body: `null`, status: 400, code: "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			create := tc.sku
			if create == "" {
				create = `{"name":"patch","stock":5,"per_user_limit":2}`
			}
			id := s.createSKU(t, create)
			before := s.state(t, id)
			r := s.call(t, http.MethodPatch, "/admin/v1/skus/"+strconv.FormatInt(id, 10), tc.body, bearer...)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("PATCH %s = %d %q (%s); want %d %q", tc.body, r.status, r.code, r.body, tc.status, tc.code)
			}
			after := s.state(t, id)
			if r.status != 200 {
				if after != before {
					t.Errorf("a %d changed the SKU: %+v → %+v", r.status, before, after)
				}
				return
			}
			var got adminSKU
			r.json(t, &got)
			if after.Version != before.Version+1 || got.Version != after.Version || after.Stock != before.Stock {
				t.Errorf("version %d → %d (answered %d), stock %d → %d; want one version bump, stock kept", before.Version, after.Version, got.Version, before.Stock, after.Stock)
			}
			var again adminSKU
			s.get(t, "/admin/v1/skus/"+strconv.FormatInt(id, 10), bearer...).json(t, &again)
			if !sameSKU(again, got) {
				t.Errorf("GET after PATCH = %+v; PATCH answered %+v", again, got)
			}
			tc.check(t, got)
		})
	}

	others := []struct {
		name, path, body string
		headers          []string
		status           int
	}{
		{"unknown sku", "/admin/v1/skus/987654321", `{"name":"x"}`, bearer, 404},
		{"no token", "/admin/v1/skus/1", `{"name":"x"}`, nil, 401},
		{"bad id", "/admin/v1/skus/zero", `{"name":"x"}`, bearer, 400},
		{"not JSON", "/admin/v1/skus/1", `{"name":"x"}`, append([]string{"Content-Type", "text/plain"}, bearer...), 415},
		{"too large", "/admin/v1/skus/1", `{"name":"` + strings.Repeat("x", 5000) + `"}`, bearer, 413},
	}
	for _, tc := range others {
		if r := s.call(t, http.MethodPatch, tc.path, tc.body, tc.headers...); r.status != tc.status {
			t.Errorf("%s: PATCH %s = %d %s; want %d", tc.name, tc.path, r.status, r.body, tc.status)
		}
	}
}

// TestAdminLimitChangeAppliesToLaterOrders lowers a limit below what a
// user holds and raises it again: the holding stays, no later order takes
// anyone over the limit in force, and the database itself refuses a
// holding over it.
func TestAdminLimitChangeAppliesToLaterOrders(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"limits","stock":100,"per_user_limit":3}`)
	path := "/admin/v1/skus/" + strconv.FormatInt(sku, 10)
	order := func(user string, qty int) reply {
		return s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":%d}`, sku, user, qty))
	}
	setLimit := func(n int) {
		if r := s.call(t, http.MethodPatch, path, fmt.Sprintf(`{"per_user_limit":%d}`, n), bearer...); r.status != 200 {
			t.Fatalf("PATCH per_user_limit %d = %d %s", n, r.status, r.body)
		}
	}
	s.buy(t, sku, "big", 3, "")
	s.buy(t, sku, "small", 1, "")
	setLimit(2)

	steps := []struct {
		user   string
		qty    int
		status int
		code   string
	}{
		{"big", 1, 409, "limit_exceeded"},   // holds 3 > 2: no more
		{"small", 1, 201, ""},               // 1 + 1 = 2
		{"small", 1, 409, "limit_exceeded"}, // 3 > 2
		{"new", 3, 409, "limit_exceeded"},   // a first-time buyer over the new limit
		{"new", 2, 201, ""},
	}
	for i, st := range steps {
		if r := order(st.user, st.qty); r.status != st.status || r.code != st.code {
			t.Errorf("step %d: %s buys %d = %d %q (%s); want %d %q", i, st.user, st.qty, r.status, r.code, r.body, st.status, st.code)
		}
	}
	// The copies agree with the limit: each is max(holding, limit).
	type holding struct {
		User            string
		Quantity, Limit int64
	}
	read := func() map[string]holding {
		rows, err := s.db.Raw("SELECT user_id, quantity, per_user_limit FROM user_purchases WHERE sku_id = ?", sku).Rows()
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]holding{}
		for rows.Next() {
			var h holding
			if err := rows.Scan(&h.User, &h.Quantity, &h.Limit); err != nil {
				t.Fatal(err)
			}
			m[h.User] = h
		}
		return m
	}
	want := map[string]holding{"big": {"big", 3, 3}, "small": {"small", 2, 2}, "new": {"new", 2, 2}}
	if got := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("user_purchases = %v; want %v", got, want)
	}
	// The database refuses a holding over the limit, whatever the application does.
	if err := s.db.Exec("UPDATE user_purchases SET quantity = quantity + 1 WHERE sku_id = ? AND user_id = 'small'", sku).Error; err == nil {
		t.Error("the database accepted a holding over the lowered limit")
	}

	setLimit(4)
	if r := order("big", 1); r.status != 201 {
		t.Errorf("after raising the limit to 4, big (3) buys 1 = %d %s; want 201", r.status, r.body)
	}
	if r := order("big", 1); r.code != "limit_exceeded" {
		t.Errorf("big (4) buys 1 more = %d %q; want limit_exceeded", r.status, r.code)
	}
	want = map[string]holding{"big": {"big", 4, 4}, "small": {"small", 2, 4}, "new": {"new", 2, 4}}
	if got := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after raising: user_purchases = %v; want %v", got, want)
	}
	if st := s.state(t, sku); st.Sold != 3+1+1+2+1 || st.Held != st.Sold {
		t.Errorf("state %+v; want sold 8, all of it held", st)
	}
}

// TestSKUNamesRefuseControlCharacters: a name with control characters (a
// NUL, an ANSI escape, a tab, DEL, a C1 control) is refused on create and
// on rename, 400 and nothing changed, so the public list never shows one.
func TestSKUNamesRefuseControlCharacters(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id := s.createSKU(t, `{"name":"plain","stock":1}`)
	for _, name := range []string{`a\u0000b\u001b[31m`, `tab\there`, `line\nbreak`, `del\u007f`, `c1\u0085`} {
		if r := s.call(t, http.MethodPost, "/admin/v1/skus", `{"name":"`+name+`","stock":1}`, bearer...); r.status != http.StatusBadRequest || r.code != "invalid_request" {
			t.Errorf("create a SKU named %s = %d %q; want 400 invalid_request", name, r.status, r.code)
		}
		if r := s.call(t, http.MethodPatch, "/admin/v1/skus/"+strconv.FormatInt(id, 10), `{"name":"`+name+`"}`, bearer...); r.status != http.StatusBadRequest || r.code != "invalid_request" {
			t.Errorf("rename a SKU to %s = %d %q; want 400 invalid_request", name, r.status, r.code)
		}
	}
	r := s.get(t, "/api/v1/skus")
	if r.status != http.StatusOK || strings.Count(string(r.body), `"name"`) != 1 || !strings.Contains(string(r.body), `"name":"plain"`) {
		t.Errorf("GET /api/v1/skus = %d %s; want the one SKU, still named plain", r.status, r.body)
	}
	if r := s.call(t, http.MethodPatch, "/admin/v1/skus/"+strconv.FormatInt(id, 10), `{"name":"Ünïcode name, with spaces"}`, bearer...); r.status != http.StatusOK {
		t.Errorf("rename to a printable name = %d %s; want 200", r.status, r.body)
	}
}

// altered is cursor with its sixth character changed: a string of the
// cursor's shape that the service never gave.
func altered(cursor string) string {
	c := []byte(cursor)
	if c[5] == 'A' {
		c[5] = 'B'
	} else {
		c[5] = 'A'
	}
	return string(c)
}
