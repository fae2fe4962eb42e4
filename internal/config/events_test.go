package config

import (
	"strings"
	"testing"
)

// TestEvents_RefusedAtStart: each events.* value that cannot be made safe
// is refused, naming its key; off, none is looked at.
func TestEvents_RefusedAtStart(t *testing.T) {
	on := func(kv ...string) map[string]string {
		m := map[string]string{"SECKILL_EVENTS_ENABLED": "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name string
		env  map[string]string
		want string // "" for accepted
	}{
		{"defaults, on", on(), ""},
		{"off ignores a bad url", map[string]string{"SECKILL_EVENTS_NATS_URL": "http://x"}, ""},
		{"not a nats url", on("SECKILL_EVENTS_NATS_URL", "http://127.0.0.1:4222"), "events.nats_url"},
		{"a wildcard subject", on("SECKILL_EVENTS_SUBJECT", "seckill.*"), "events.subject"},
		{"an empty subject token", on("SECKILL_EVENTS_SUBJECT", "seckill..orders"), "events.subject"},
		{"a stream with a dot", on("SECKILL_EVENTS_STREAM", "A.B"), "events.stream"},
		{"batch 0", on("SECKILL_EVENTS_BATCH", "0"), "events.batch"},
		{"batch past its ceiling", on("SECKILL_EVENTS_BATCH", "10001"), "events.batch"},
		{"a busy loop", on("SECKILL_EVENTS_INTERVAL", "1ms"), "events.interval"},
		{"back-off shorter than the interval", on("SECKILL_EVENTS_INTERVAL", "1s", "SECKILL_EVENTS_MAX_BACKOFF", "100ms"), "events.max_backoff"},
		{"stream age below the duplicate window", on("SECKILL_EVENTS_STREAM_MAX_AGE", "1m"), "events.stream_max_age"},
		{"negative retention", on("SECKILL_EVENTS_RETENTION", "-1s"), "events.retention"},
		{"retention 0", on("SECKILL_EVENTS_RETENTION", "0s"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("", env(tt.env))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Load = %v; want accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Load = %v; want an error naming %s", err, tt.want)
			}
		})
	}
}
