package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/loadtest/verify"
)

func TestReadConsole(t *testing.T) {
	ids, err := orderid.New([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "console.log")
	lines := []string{
		`time="2026-11-22T05:10:38Z" level=info msg="ack ` + ids.Encode(12) + ` lt-u1" source=console`,
		`time="2026-11-22T05:10:38Z" level=info msg="unavail 1700000000123 503" source=console`,
		`time="2026-11-22T05:10:38Z" level=info msg="unexpected order 500  not an answer: {\"error\":{}}" source=console`,
		`time="2026-11-22T05:10:38Z" level=info msg="ack ` + ids.Encode(13) + ` lt-r7" source=console`,
		`time="2026-11-22T05:10:38Z" level=info msg="unsure lt-u5" source=console`,
		`time="2026-11-22T05:10:38Z" level=info msg="refused lt-k9 lt-u9 sold_out" source=console`,
		`noise`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := readConsole(path, ids, &restockLog{})
	if err != nil {
		t.Fatalf("readConsole() error: %v", err)
	}
	if a := c.Clients.Acknowledged; len(a) != 2 || a[0].OrderID != 12 || a[1].UserID != "lt-r7" {
		t.Errorf("readConsole() acks = %+v; want orders 12 (lt-u1) and 13 (lt-r7)", a)
	}
	if u := c.Clients.Unsure; len(u) != 1 || u[0] != "lt-u5" {
		t.Errorf("readConsole() unsure = %q; want [lt-u5]", u)
	}
	if f := c.Clients.Refused; len(f) != 1 || f[0] != (verify.Refusal{Key: "lt-k9", UserID: "lt-u9", Code: "sold_out"}) {
		t.Errorf("readConsole() refused = %+v; want key lt-k9 of lt-u9, sold_out", f)
	}
	if len(c.Unavailable) != 1 || c.Unavailable[0].UnixMilli() != 1700000000123 {
		t.Errorf("readConsole() unavailable = %v; want one at 1700000000123", c.Unavailable)
	}
	if len(c.Unexpected) != 1 || !strings.Contains(c.Unexpected[0], `{"error":{}}`) {
		t.Errorf("readConsole() unexpected = %q; want the 500 with its unquoted body", c.Unexpected)
	}
	// An acknowledged id this service did not write is an error, not a pass.
	forged := filepath.Join(t.TempDir(), "forged.log")
	if err := os.WriteFile(forged, []byte(`time="x" level=info msg="ack 12 lt-u1" source=console`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readConsole(forged, ids, &restockLog{}); err == nil {
		t.Error("readConsole(an ack of a plain number) = nil error; want an error")
	}
	if c, err := readConsole(filepath.Join(t.TempDir(), "absent"), ids, &restockLog{}); err != nil || len(c.Clients.Acknowledged) != 0 {
		t.Errorf("readConsole(absent) = %+v, %v; want empty, nil", c, err)
	}
}

func TestFailedThresholds(t *testing.T) {
	var s k6Summary
	raw := `{"metrics": {
		"unexpected_status": {"count": 3, "thresholds": {"count==0": true}},
		"http_req_duration{kind:order}": {"p(95)": 10, "thresholds": {"p(95)<1000": false, "p(99)<3000": true}},
		"http_reqs": {"count": 100, "rate": 5}}}`
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	want := []string{"http_req_duration{kind:order}: p(99)<3000", "unexpected_status: count==0"}
	if got := s.failedThresholds(); !slices.Equal(got, want) {
		t.Errorf("failedThresholds() = %q; want %q", got, want)
	}
}

func TestUnavailableOutside(t *testing.T) {
	start := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	r := &run{cfg: Config{UnavailableGrace: 10 * time.Second}}
	r.monitor.faultStart, r.monitor.faultBack = start, start.Add(3*time.Second)
	tests := []struct {
		name string
		at   []time.Time
		want int // violations
	}{
		{name: "none", want: 0},
		{name: "during the outage", at: []time.Time{start.Add(time.Second)}, want: 0},
		{name: "within the grace", at: []time.Time{start.Add(12 * time.Second)}, want: 0},
		{name: "before the fault", at: []time.Time{start.Add(-5 * time.Second)}, want: 1},
		{name: "after the grace", at: []time.Time{start.Add(time.Second), start.Add(20 * time.Second)}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.unavailableOutside(tt.at)
			if len(got) != tt.want {
				t.Fatalf("unavailableOutside(%v) = %v; want %d violation(s)", tt.at, got, tt.want)
			}
			if len(got) == 1 && got[0].Name != UnavailableOutsideFault {
				t.Errorf("violation name = %q; want %q", got[0].Name, UnavailableOutsideFault)
			}
		})
	}
	noFault := &run{}
	if got := noFault.unavailableOutside([]time.Time{start}); len(got) != 1 || !strings.Contains(got[0].Message, "no fault") {
		t.Errorf("unavailableOutside without a fault = %v; want one violation saying no fault was injected", got)
	}
}

func TestNormalize_refuses(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Config)
		want string
	}{
		{name: "unknown fault", set: func(c *Config) { c.Fault = "disk" }, want: "fault"},
		{name: "no instance", set: func(c *Config) { c.Instances = 0 }, want: "instances"},
		{name: "target without token", set: func(c *Config) { c.Target, c.BaseURLs = true, []string{"http://x"} }, want: "admin token"},
		{name: "target with fault", set: func(c *Config) {
			c.Target, c.BaseURLs, c.AdminToken, c.Fault = true, []string{"http://x"}, strings.Repeat("t", 16), FaultRedis
		}, want: "cannot inject"},
		{name: "redis fault on shared redis", set: func(c *Config) { c.Fault, c.RedisAddrs = FaultRedis, []string{"127.0.0.1:6379"} }, want: "own redis-server"},
		{name: "instance fault alone", set: func(c *Config) { c.Fault, c.Instances = FaultInstance, 1 }, want: "at least 2"},
		{name: "fault-at past the stock", set: func(c *Config) { c.FaultAt = 1 }, want: "fault-at"},
		{name: "killing more redis-servers than started", set: func(c *Config) { c.Fault, c.RedisServers, c.RedisKill = FaultRedis, 3, 4 }, want: "redis-kill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			tt.set(&cfg)
			if _, err := normalize(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("normalize(%+v) error = %v; want it to mention %q", cfg, err, tt.want)
			}
		})
	}
}

func TestLongestStall(t *testing.T) {
	// Stock 1000: a stall is a stretch selling fewer than 10 units.
	samples := []sample{{0, 0}, {0.5, 0}, {0.7, 3}, {1, 100}, {1.5, 200}, {2, 203}, {2.5, 205}, {3, 209}, {3.5, 300}, {4, 400}, {4.5, 1000}, {5, 1000}, {9, 1000}}
	if got := longestStall(samples, 1000); got != 1.5 {
		t.Errorf("longestStall() = %v; want 1.5 (a trickle of 9 units from 1.5s to 3s; nothing before the first 1%% or after the sell-out counts)", got)
	}
	if got := longestStall(samples[:4], 1000); got != 0 {
		t.Errorf("longestStall(moving) = %v; want 0", got)
	}
}

// TestBrokerOutage_Violations: the broker fault fails a run whose sale
// stopped, or whose metrics never showed the events waiting, while the
// broker was down; a sale that had sold out before is not blamed.
func TestBrokerOutage_Violations(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    BrokerOutage
		want int
	}{
		{"sold on, backlog shown", BrokerOutage{Backlog: 900, AgeS: 28, Sold: 500, Left: 900}, 0},
		{"nothing sold", BrokerOutage{Backlog: 900, AgeS: 28, Sold: 0, Left: 900}, 1},
		{"no backlog shown", BrokerOutage{Backlog: 0, AgeS: 0, Sold: 500, Left: 900}, 1},
		{"backlog without an age", BrokerOutage{Backlog: 900, AgeS: 0, Sold: 500, Left: 900}, 1},
		{"both", BrokerOutage{Left: 900}, 2},
	} {
		if got := tc.o.violations(30 * time.Second); len(got) != tc.want {
			t.Errorf("%s: %d violations %v; want %d", tc.name, len(got), got, tc.want)
		}
	}
}
