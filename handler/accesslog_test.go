package handler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/logging"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

// logLines decodes each JSON line written to buf.
func logLines(t *testing.T, buf *testenv.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestAccessLog requires one JSON line per request, with what an operator
// searches by, and none when log.access is off; a logger carrying
// attributes (written through slog, not by hand) adds them.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path, requestID string
		route                   string
		status                  int
		outcome, code           string
	}{
		{http.MethodGet, "/healthz", "probe-1", "/healthz", 200, "ok", ""},
		{http.MethodHead, "/healthz", "probe-2", "/healthz", 200, "ok", ""},
		{http.MethodGet, "/nope/", "lost-1", "unmatched", 404, "refused", "not_found"},
		{http.MethodDelete, "/healthz", "wrong-1", "unmatched", 405, "refused", "method_not_allowed"},
	}
	for _, run := range []struct{ on, with bool }{{true, false}, {false, false}, {true, true}} {
		on := run.on
		var buf testenv.SyncBuffer
		log := logging.New(&buf, "info", "json")
		if run.with {
			log = log.With("instance", "a")
		}
		h, err := handler.New(handler.Config{Log: log, AccessLog: on})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		for _, tc := range tests {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Request-ID", tc.requestID)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		srv.Close() // waits for the handlers: every line is written
		lines := logLines(t, &buf)
		if !on {
			if len(lines) != 0 {
				t.Errorf("log.access off: %d lines (%v); want none", len(lines), lines)
			}
			continue
		}
		if len(lines) != len(tests) {
			t.Fatalf("%d access lines for %d requests: %v", len(lines), len(tests), lines)
		}
		for i, tc := range tests {
			l := lines[i]
			if l["msg"] != "request" || l["method"] != tc.method || l["route"] != tc.route || l["path"] != tc.path ||
				l["status"] != float64(tc.status) || l["request_id"] != tc.requestID {
				t.Errorf("%s %s logged %v; want msg request, route %s, status %d, request_id %s", tc.method, tc.path, l, tc.route, tc.status, tc.requestID)
			}
			if inst, has := l["instance"]; run.with != has || (has && inst != "a") {
				t.Errorf("logger With(instance, a) %v: %s %s logged instance %v", run.with, tc.method, tc.path, inst)
			}
			if code, has := l["code"]; l["outcome"] != tc.outcome || (tc.code == "" && has) || (tc.code != "" && code != tc.code) {
				t.Errorf("%s %s logged outcome %v, code %v; want %s, %q", tc.method, tc.path, l["outcome"], l["code"], tc.outcome, tc.code)
			}
			if b, ok := l["bytes"].(float64); !ok || b < 0 || (tc.method != http.MethodHead && b == 0) {
				t.Errorf("%s %s: bytes = %v; want the body's size", tc.method, tc.path, l["bytes"])
			}
			if ms, ok := l["latency_ms"].(float64); !ok || ms < 0 {
				t.Errorf("%s %s: latency_ms = %v; want a number of milliseconds", tc.method, tc.path, l["latency_ms"])
			}
		}
	}
}

// failingOrders is an order flow whose every call fails with an error the
// handler does not know: a 500, logged once with its cause.
type failingOrders struct{ handler.Orders }

func (failingOrders) Place(context.Context, service.OrderRequest) (service.Placed, error) {
	return service.Placed{}, errors.New("boom")
}

// TestRequestIDReachesLogsErrorsAndHeader: a request's ID, the client's
// X-Request-ID when it is sane (at most 64 characters, letters, digits and
// ._:/+=@-) or one generated, is echoed in X-Request-ID, in the error
// body, on the access line and on every error line logged for it; and the
// access line's latency is a number of milliseconds.
func TestRequestIDReachesLogsErrorsAndHeader(t *testing.T) {
	t.Parallel()
	var buf testenv.SyncBuffer
	h, err := handler.New(handler.Config{Orders: failingOrders{}, Log: logging.New(&buf, "info", "json"), AccessLog: true, MaxBodyBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	sane := "trace-42.a:b/c+d=e@f_g"
	for _, sent := range []string{sane, "", "has space", `quote"d`, "<script>", strings.Repeat("x", 65), "tab\there"} {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/orders", strings.NewReader(`{"sku_id":1,"user_id":"u-1","quantity":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if sent != "" {
			req.Header.Set("X-Request-ID", sent)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct {
				Code      string `json:"code"`
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		id := resp.Header.Get("X-Request-ID")
		if err != nil || resp.StatusCode != http.StatusInternalServerError || body.Error.Code != "internal" {
			t.Fatalf("POST with X-Request-ID %q = %d %+v (%v); want 500 internal", sent, resp.StatusCode, body, err)
		}
		if (sent == sane) != (id == sane) || id == "" || !regexp.MustCompile(`^[A-Za-z0-9._:/+=@-]{1,64}$`).MatchString(id) {
			t.Errorf("X-Request-ID %q sent: echoed %q; want it kept only when sane, else a generated one", sent, id)
		}
		if body.Error.RequestID != id {
			t.Errorf("X-Request-ID %q: the error body names %q; want the echoed %q", sent, body.Error.RequestID, id)
		}
	}
	srv.Close() // waits for the handlers: every line is written
	byID := map[string][]map[string]any{}
	for _, l := range logLines(t, &buf) {
		id, _ := l["request_id"].(string)
		byID[id] = append(byID[id], l)
	}
	if len(byID[""]) != 0 {
		t.Errorf("lines without a request_id: %v", byID[""])
	}
	if len(byID) != 7 {
		t.Errorf("%d request ids in the log; want 7, one per request: %v", len(byID), byID)
	}
	for id, lines := range byID {
		var access, internal int
		for _, l := range lines {
			switch l["msg"] {
			case "request":
				access++
				if ms, ok := l["latency_ms"].(float64); !ok || ms < 0 {
					t.Errorf("request %s: latency_ms = %v; want a number of milliseconds", id, l["latency_ms"])
				}
				if _, has := l["latency"]; has {
					t.Errorf("request %s: a latency key besides latency_ms: %v", id, l["latency"])
				}
			case "internal error":
				internal++
			}
		}
		if access != 1 || internal != 1 {
			t.Errorf("request %s: %d access and %d error lines; want one each: %v", id, access, internal, lines)
		}
	}
}
