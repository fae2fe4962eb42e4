package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/logging"
)

func TestLines(t *testing.T) {
	ctx := logging.WithRequestID(context.Background(), "req-7")
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want map[string]any // the keys a JSON line must carry with these values
	}{
		{"durations are strings", func(l *slog.Logger) {
			l.Info("x", "took", 12345678*time.Nanosecond, "tiny", 800*time.Nanosecond, "long", 3*time.Second)
		}, map[string]any{"took": "12.346ms", "tiny": "800ns", "long": "3s"}},
		{"an attribute named msg does not repeat the key", func(l *slog.Logger) {
			l.Warn("redis client", "msg", "dial tcp: refused")
		}, map[string]any{"msg": "redis client", "attr_msg": "dial tcp: refused"}},
		{"reserved keys in With", func(l *slog.Logger) {
			l.With("level", "x", "time", "y").Info("m")
		}, map[string]any{"level": "INFO", "attr_level": "x", "attr_time": "y"}},
		{"request id from the context", func(l *slog.Logger) {
			l.InfoContext(ctx, "m", "d", time.Duration(0))
		}, map[string]any{"request_id": "req-7", "d": "0s"}},
		{"trace id beside the request id", func(l *slog.Logger) {
			l.InfoContext(logging.WithTraceID(ctx, "4bf92f3577b34da6a3ce929d0e0e4736"), "m")
		}, map[string]any{"request_id": "req-7", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(logging.New(&buf, "info", "json"))
			line := strings.TrimSpace(buf.String())
			for _, k := range []string{`"msg"`, `"level"`, `"time"`} {
				if n := strings.Count(line, k+":"); n != 1 {
					t.Errorf("%s: key %s appears %d times; want once", line, k, n)
				}
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			for k, v := range tt.want {
				if m[k] != v {
					t.Errorf("%s: %s = %v; want %v", line, k, m[k], v)
				}
			}

			buf.Reset()
			tt.log(logging.New(&buf, "info", "text"))
			if strings.Count(buf.String(), " msg=") != 1 {
				t.Errorf("text line %q: msg= not exactly once", buf.String())
			}
		})
	}
}
