package logging_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/logging"
)

// slogLine is what log's handler writes of a, the line the access log
// wrote through slog before LogAccess.
func slogLine(t *testing.T, log *slog.Logger, ctx context.Context, at time.Time, a *logging.Access) {
	t.Helper()
	r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
	r.AddAttrs(
		slog.String("method", a.Method),
		slog.String("route", a.Route),
		slog.String("path", a.Path),
		slog.Int("status", a.Status),
		slog.String("outcome", a.Outcome),
	)
	if a.Code != "" {
		r.AddAttrs(slog.String("code", a.Code))
	}
	r.AddAttrs(slog.Float64("latency_ms", a.LatencyMS), slog.Int("bytes", a.Bytes), slog.String("ip", a.IP))
	if err := log.Handler().Handle(ctx, r); err != nil {
		t.Fatal(err)
	}
}

func withIDs(request, trace string) context.Context {
	ctx := context.Background()
	if request != "" {
		ctx = logging.WithRequestID(ctx, request)
	}
	if trace != "" {
		ctx = logging.WithTraceID(ctx, trace)
	}
	return ctx
}

// FuzzLogAccess: the line LogAccess writes by hand is, byte for byte,
// the line New's JSON handler writes of the same request at the same
// time, whatever its strings, numbers, time and IDs.
func FuzzLogAccess(f *testing.F) {
	f.Add("POST", "/api/v1/orders", "/api/v1/orders", 409, "refused", "sold_out", 0.042, 173, "127.0.0.1",
		"0123456789abcdef", "", int64(1764000000), int64(123456789), 0)
	f.Add("GET", "unmatched", "/x<y>&z\u2028\u2029\"\\", 404, "refused", "not_found", 1e21, 0, "::1",
		"req\n\r\t\b\f\x00\x1f\x7f", "4bf92f3577b34da6a3ce929d0e0e4736", int64(0), int64(0), 3600)
	f.Add("\xff\xfe", "\xe2\x80", "caf\u00e9 \ufffd \U0001F600", 200, "ok", "", 1e-7, -1, "\xed\xa0\x80",
		"", "", int64(-62135596800), int64(1), -19800)
	f.Add("DELETE", "/a", "/b", -7, "failed", "internal", 5e-324, 1<<40, "", "r", "t", int64(253402300799), int64(999999999), 86399)
	f.Add("PUT", "", "", 0, "", "", math.Copysign(0, -1), 0, "", "", "", int64(253402300800), int64(0), -86399)
	f.Add("GET", "/", "/", 200, "ok", "", 123456789.125, 1, "10.0.0.1", "", "", int64(-62135596801), int64(0), 0)
	f.Fuzz(func(t *testing.T, method, route, path string, status int, outcome, code string, latency float64, size int, ip,
		request, trace string, sec, nsec int64, zone int) {
		at := time.Unix(sec, nsec).In(time.FixedZone("", zone%(24*3600)))
		a := &logging.Access{Method: method, Route: route, Path: path, Status: status, Outcome: outcome, Code: code,
			LatencyMS: latency, Bytes: size, IP: ip}
		ctx := withIDs(request, trace)
		var got, want bytes.Buffer
		if err := logging.LogAccess(ctx, logging.New(&got, "info", "json"), at, a); err != nil {
			t.Fatal(err)
		}
		slogLine(t, logging.New(&want, "info", "json"), ctx, at, a)
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("LogAccess wrote\n%q\nslog writes\n%q", got.Bytes(), want.Bytes())
		}
	})
}

// TestLogAccessThroughHandler: a logger LogAccess cannot write for by
// hand (text, With, WithGroup, another handler, a zero time) still gets
// the line its handler writes.
func TestLogAccessThroughHandler(t *testing.T) {
	at := time.Date(2025, 11, 28, 18, 4, 5, 600700800, time.UTC)
	a := &logging.Access{Method: "POST", Route: "/api/v1/orders", Path: "/api/v1/orders", Status: 409,
		Outcome: "refused", Code: "sold_out", LatencyMS: 0.125, Bytes: 90, IP: "10.1.2.3"}
	ctx := withIDs("req-1", "4bf92f3577b34da6a3ce929d0e0e4736")
	tests := []struct {
		name string
		log  func(w *bytes.Buffer) *slog.Logger
		at   time.Time
		want string // a part of the line
	}{
		{"text", func(w *bytes.Buffer) *slog.Logger { return logging.New(w, "info", "text") }, at, " msg=request method=POST"},
		{"With", func(w *bytes.Buffer) *slog.Logger { return logging.New(w, "info", "json").With("instance", "a") }, at,
			`"msg":"request","instance":"a","method":"POST"`},
		{"WithGroup", func(w *bytes.Buffer) *slog.Logger { return logging.New(w, "info", "json").WithGroup("g") }, at,
			`"msg":"request","g":{"method":"POST"`},
		{"slog's own handler", func(w *bytes.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }, at,
			`"latency_ms":0.125,"bytes":90,"ip":"10.1.2.3"}`},
		{"zero time", func(w *bytes.Buffer) *slog.Logger { return logging.New(w, "info", "json") }, time.Time{},
			`{"level":"INFO","msg":"request"`},
		{"not a number", func(w *bytes.Buffer) *slog.Logger { return logging.New(w, "info", "json") }, at, `"latency_ms":"!ERROR:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := *a
			if tt.name == "not a number" {
				a.LatencyMS = math.NaN()
			}
			var got, want bytes.Buffer
			if err := logging.LogAccess(ctx, tt.log(&got), tt.at, &a); err != nil {
				t.Fatal(err)
			}
			slogLine(t, tt.log(&want), ctx, tt.at, &a)
			if got.String() != want.String() {
				t.Errorf("LogAccess wrote\n%s\nthe handler writes\n%s", got.String(), want.String())
			}
			if !strings.Contains(got.String(), tt.want) {
				t.Errorf("line %s; want it to hold %s", got.String(), tt.want)
			}
		})
	}
}

// TestLogAccessWholeLines: access lines and slog's lines written at once
// by many goroutines to one writer that is not safe for concurrent use
// (a bytes.Buffer, so -race sees any unguarded Write) come out whole.
func TestLogAccessWholeLines(t *testing.T) {
	var buf bytes.Buffer
	log := logging.New(&buf, "info", "json")
	ctx := withIDs("req-1", "")
	a := &logging.Access{Method: "GET", Route: "/healthz", Path: "/healthz", Status: 200, Outcome: "ok", LatencyMS: 0.01, IP: "::1"}
	const writers, each = 8, 200
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-start
			for range each {
				if i%2 == 0 {
					if err := logging.LogAccess(ctx, log, time.Now(), a); err != nil {
						t.Error(err)
					}
				} else {
					log.InfoContext(ctx, "other", "path", strings.Repeat("x", 300))
				}
			}
		})
	}
	close(start)
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != writers*each {
		t.Fatalf("%d lines; want %d", len(lines), writers*each)
	}
	var access int
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, `{"time":"`) && strings.HasSuffix(l, `"path":"/healthz","status":200,"outcome":"ok","latency_ms":0.01,"bytes":0,"ip":"::1","request_id":"req-1"}`):
			access++
		case strings.HasPrefix(l, `{"time":"`) && strings.HasSuffix(l, `"msg":"other","path":"`+strings.Repeat("x", 300)+`","request_id":"req-1"}`):
		default:
			t.Fatalf("torn line %q", l)
		}
	}
	if access != writers/2*each {
		t.Errorf("%d access lines; want %d", access, writers/2*each)
	}
}
