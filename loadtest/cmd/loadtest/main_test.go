package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/seckill/seckill/loadtest/harness"
)

// TestParseFlags_defaults checks that -smoke, -fault mysql-failover and
// -scenario fair pick the defaults the other flags override.
func TestParseFlags_defaults(t *testing.T) {
	smoke, full := harness.Smoke(), harness.Default()
	tests := []struct {
		name  string
		args  []string
		stock int64
		rate  int
	}{
		{name: "full", args: nil, stock: full.Stock, rate: full.Rate},
		{name: "smoke", args: []string{"--smoke"}, stock: smoke.Stock, rate: smoke.Rate},
		{name: "smoke after a flag", args: []string{"-stock", "10", "-smoke=true"}, stock: 10, rate: smoke.Rate},
		{name: "not smoke", args: []string{"-smoke=false"}, stock: full.Stock, rate: full.Rate},
		{name: "mysql-failover", args: []string{"-smoke", "-fault", "mysql-failover", "-rate", "50"}, stock: 4000, rate: 50},
		{name: "fair", args: []string{"-scenario", "fair"}, stock: 3000, rate: full.Rate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if err != nil || o.cfg.Stock != tt.stock || o.cfg.Rate != tt.rate {
				t.Errorf("parseFlags(%q) = stock %d, rate %d, %v; want stock %d, rate %d", tt.args, o.cfg.Stock, o.cfg.Rate, err, tt.stock, tt.rate)
			}
		})
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
		{name: "broker fault without events", args: []string{"-fault", "broker", "-events=false"}, want: "needs -events"},
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
