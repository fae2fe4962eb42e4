package handler_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/logging"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
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
// searches by, and none when log.access is off.
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
	for _, on := range []bool{true, false} {
		var buf syncBuffer
		h, err := handler.New(handler.Config{Log: logging.New(&buf, "info", "json"), AccessLog: on})
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
		lines := buf.lines(t)
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
			if code, has := l["code"]; l["outcome"] != tc.outcome || (tc.code == "" && has) || (tc.code != "" && code != tc.code) {
				t.Errorf("%s %s logged outcome %v, code %v; want %s, %q", tc.method, tc.path, l["outcome"], l["code"], tc.outcome, tc.code)
			}
			if b, ok := l["bytes"].(float64); !ok || b < 0 || (tc.method != http.MethodHead && b == 0) {
				t.Errorf("%s %s: bytes = %v; want the body's size", tc.method, tc.path, l["bytes"])
			}
			lat, _ := l["latency"].(string)
			if _, err := time.ParseDuration(lat); err != nil || !strings.ContainsAny(lat, "µmns") {
				t.Errorf("%s %s: latency = %v; want a duration string such as 1.234ms", tc.method, tc.path, l["latency"])
			}
		}
	}
}
