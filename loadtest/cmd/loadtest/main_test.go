package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestSmokeRequested(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"-smoke"}, true},
		{[]string{"--smoke"}, true},
		{[]string{"-stock", "10", "-smoke=true"}, true},
		{[]string{"-smoke=false"}, false},
		{[]string{"-fault", "redis"}, false},
	}
	for _, tt := range tests {
		if got := smokeRequested(tt.args); got != tt.want {
			t.Errorf("smokeRequested(%q) = %v; want %v", tt.args, got, tt.want)
		}
	}
}

// TestRun_refuses checks that bad flags fail before anything is started.
func TestRun_refuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "unknown fault", args: []string{"-fault", "disk"}, want: "fault"},
		{name: "target without urls", args: []string{"-target", "-admin-token", "0123456789abcdef"}, want: "base URLs"},
		{name: "stray argument", args: []string{"now"}, want: "unexpected arguments"},
		{name: "bad env", args: []string{"-env", "NOEQUALS"}, want: "KEY=VALUE"},
		{name: "unknown lock", args: []string{"-lock", "etcd"}, want: "lock"},
		{name: "zk-leader on redis", args: []string{"-fault", "zk-leader"}, want: "-lock zookeeper"},
		{name: "redis fault without redis", args: []string{"-lock", "zookeeper", "-fault", "redis"}, want: "without Redis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SECKILL_ADMIN_TOKEN", "")
			err := run(context.Background(), tt.args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) error = %v; want it to mention %q", tt.args, err, tt.want)
			}
		})
	}
	if err := run(context.Background(), []string{"-h"}, io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run(-h) error = %v; want flag.ErrHelp", err)
	}
}
