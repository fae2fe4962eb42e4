package handler_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/logging"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/metrics"
)

// TestHeadOnEveryGET walks every GET route handler.New registers and
// requires HEAD on it to answer the GET's status with no body.
func TestHeadOnEveryGET(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	extra := map[string]http.Handler{"/metrics": m.Handler()}
	s := newStack(t, func(o *stackOptions) { o.extra = extra })
	sku := s.createSKU(t, `{"name":"head","stock":5}`)
	ord := s.buy(t, sku, "u-head", 1, "")

	h, err := handler.New(handler.Config{Log: slog.New(slog.DiscardHandler), Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	engine := h.(*gin.Engine)
	param := regexp.MustCompile(`:[A-Za-z_]+`)
	gets := 0
	for _, r := range engine.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		gets++
		id := strconv.FormatInt(sku, 10)
		if strings.HasPrefix(r.Path, "/api/v1/orders/") {
			id = ord
		}
		path := param.ReplaceAllString(r.Path, id)
		for _, hdr := range [][]string{nil, bearer} {
			do := func(method string) (int, []byte) {
				req, err := http.NewRequest(method, s.url+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if hdr != nil {
					req.Header.Set(hdr[0], hdr[1])
				}
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				return resp.StatusCode, body
			}
			get, _ := do(http.MethodGet)
			head, body := do(http.MethodHead)
			if head != get || len(body) != 0 {
				t.Errorf("HEAD %s (auth %v) = %d with %d bytes; want GET's %d and no body", path, hdr != nil, head, len(body), get)
			}
		}
	}
	if gets < 10 {
		t.Errorf("walked %d GET routes; want every one of routes.go", gets)
	}
}

// TestAdminSKUOneShape: every admin answer about a SKU (create, get, list,
// restock, update) carries the same fields, pending and paid included,
// with the same values.
func TestAdminSKUOneShape(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	created := s.call(t, http.MethodPost, "/admin/v1/skus", `{"name":"shape","stock":10,"per_user_limit":2}`, bearer...)
	var c struct {
		ID int64 `json:"id"`
	}
	created.json(t, &c)
	s.buy(t, c.ID, "u-a", 2, "")
	s.buy(t, c.ID, "u-b", 1, "")
	path := "/admin/v1/skus/" + strconv.FormatInt(c.ID, 10)

	list := s.get(t, "/admin/v1/skus", bearer...)
	var page struct {
		SKUs []json.RawMessage `json:"skus"`
	}
	list.json(t, &page)
	if len(page.SKUs) != 1 {
		t.Fatalf("list = %s; want the one SKU", list.body)
	}
	answers := []struct {
		name          string
		body          []byte
		pending, paid int64
	}{
		{"create", created.body, 0, 0},
		{"get", s.get(t, path, bearer...).body, 3, 0},
		{"list", page.SKUs[0], 3, 0},
		{"restock", s.call(t, http.MethodPut, path+"/stock", `{"stock":20}`, bearer...).body, 3, 0},
		{"update", s.call(t, http.MethodPatch, path, `{"name":"shape 2"}`, bearer...).body, 3, 0},
	}
	want := []string{"ends_at", "id", "name", "paid", "pending", "per_user_limit", "sold", "starts_at", "stock", "version"}
	for _, a := range answers {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(a.body, &m); err != nil {
			t.Fatalf("%s: %s: %v", a.name, a.body, err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		if fmt.Sprint(sorted(keys)) != fmt.Sprint(want) {
			t.Errorf("%s answers fields %v; want %v", a.name, sorted(keys), want)
		}
		if string(m["pending"]) != strconv.FormatInt(a.pending, 10) || string(m["paid"]) != strconv.FormatInt(a.paid, 10) {
			t.Errorf("%s: pending %s, paid %s; want %d, %d", a.name, m["pending"], m["paid"], a.pending, a.paid)
		}
	}
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// TestSKUsOnSale: the public list shows the SKUs whose sale has not ended,
// in the shoppers' view, by pages whose cursor walks past ended ones.
func TestSKUsOnSale(t *testing.T) {
	t.Parallel()
	s := newStack(t) // a database of its own: the only SKUs are these
	open := s.createSKU(t, `{"name":"open","stock":3}`)
	ended := s.createSKU(t, `{"name":"ended","stock":3}`)
	soon := s.createSKU(t, fmt.Sprintf(`{"name":"soon","stock":3,"starts_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	if err := s.db.Exec("UPDATE skus SET starts_at = ?, ends_at = ? WHERE id = ?", time.Now().Add(-2*time.Hour).UTC(), time.Now().Add(-time.Hour).UTC(), ended).Error; err != nil {
		t.Fatal(err)
	}
	type page struct {
		SKUs      []map[string]any `json:"skus"`
		NextAfter *string          `json:"next_after"`
	}
	ids := func(p page) []int64 {
		var out []int64
		for _, sku := range p.SKUs {
			out = append(out, int64(sku["id"].(float64)))
			if _, ok := sku["sold"]; ok {
				t.Errorf("public SKU %v carries sold: the admins' view", sku)
			}
		}
		return out
	}
	var all page
	s.get(t, "/api/v1/skus").json(t, &all)
	if got := ids(all); fmt.Sprint(got) != fmt.Sprint([]int64{open, soon}) || all.NextAfter != nil {
		t.Errorf("GET /api/v1/skus = %v next_after %v; want %v and null", got, all.NextAfter, []int64{open, soon})
	}
	// Page by page (limit 1), the ended SKU is an empty page, not the end.
	var got []int64
	after := ""
	for range 5 {
		var p page
		q := "/api/v1/skus?limit=1"
		if after != "" {
			q += "&after=" + after
		}
		s.get(t, q).json(t, &p)
		got = append(got, ids(p)...)
		if p.NextAfter == nil {
			break
		}
		after = *p.NextAfter
	}
	if fmt.Sprint(got) != fmt.Sprint([]int64{open, soon}) {
		t.Errorf("paging by 1 = %v; want %v", got, []int64{open, soon})
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?after=-1", "?after=" + strconv.FormatInt(open, 10), "?after="} {
		if r := s.get(t, "/api/v1/skus"+q); r.status != http.StatusBadRequest || r.code != "invalid_request" {
			t.Errorf("GET /api/v1/skus%s = %d %s; want 400 invalid_request", q, r.status, r.code)
		}
	}
}

// TestAccessLogNamesTheOutcome: an order's access line says what happened
// (created, replayed, or the error code), so sold_out and limit_exceeded
// lines differ.
func TestAccessLogNamesTheOutcome(t *testing.T) {
	t.Parallel()
	var buf testenv.SyncBuffer
	s := newStack(t, func(o *stackOptions) { o.log = logging.New(&buf, "info", "json") })
	sku := s.createSKU(t, `{"name":"log","stock":2,"per_user_limit":1}`)
	body := func(user string) string { return fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, sku, user) }
	steps := []struct {
		user, key     string
		status        int
		outcome, code string
	}{
		{"u-1", "k-1", 201, "created", ""},
		{"u-1", "k-1", 200, "replayed", ""},
		{"u-1", "", 409, "refused", "limit_exceeded"},
		{"u-2", "", 201, "created", ""},
		{"u-3", "", 409, "refused", "sold_out"},
	}
	for _, st := range steps {
		var h []string
		if st.key != "" {
			h = []string{"Idempotency-Key", st.key}
		}
		if r := s.call(t, http.MethodPost, "/api/v1/orders", body(st.user), h...); r.status != st.status {
			t.Fatalf("order of %s = %d %s; want %d", st.user, r.status, r.body, st.status)
		}
	}
	var orders []map[string]any
	for _, l := range logLines(t, &buf) {
		if l["msg"] == "request" && l["route"] == "/api/v1/orders" && l["method"] == "POST" {
			orders = append(orders, l)
		}
	}
	if len(orders) != len(steps) {
		t.Fatalf("%d order access lines for %d orders: %v", len(orders), len(steps), orders)
	}
	for i, st := range steps {
		l := orders[i]
		code, hasCode := l["code"]
		if l["status"] != float64(st.status) || l["outcome"] != st.outcome || (st.code == "" && hasCode) || (st.code != "" && code != st.code) {
			t.Errorf("line %d = %v; want status %d, outcome %s, code %q", i, l, st.status, st.outcome, st.code)
		}
	}
}
