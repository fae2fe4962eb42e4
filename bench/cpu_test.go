package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/procstat"
)

func TestParseBoxStat(t *testing.T) {
	t.Parallel()
	// user nice system idle iowait irq softirq steal guest guest_nice
	got, err := parseBoxStat("cpu  100 5 50 9000 40 3 2 1 70 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := 161 * procstat.ClockTick; got != want {
		t.Errorf("parseBoxStat = %v; want %v (busy: all but idle, iowait and guest)", got, want)
	}
}

func TestCostOf(t *testing.T) {
	t.Parallel()
	before := cpuSample{svc: time.Second, db: 2 * time.Second, redis: 0, box: 10 * time.Second}
	after := cpuSample{svc: 3 * time.Second, db: 3 * time.Second, redis: 100 * time.Millisecond, box: 16 * time.Second}
	c := costOf(before, after, 2*time.Second, 4*time.Second, 10_000)
	if c.SvcUS != 200 || c.DBUS != 100 || c.RedisUS != 10 || c.Total() != 310 {
		t.Errorf("costOf = %+v; want 200 + 100 + 10 µs per request", c)
	}
	if c.K6Share != 2.0/6 {
		t.Errorf("k6 share = %v; want 2s of the box's 6s", c.K6Share)
	}
	if want := 0.9 / 4; c.OtherCores < want-1e-9 || c.OtherCores > want+1e-9 {
		t.Errorf("other cores = %v; want 0.9s of 4s wall", c.OtherCores)
	}
	if z := costOf(before, after, 0, time.Second, 0); z != (cpuCost{}) {
		t.Errorf("costOf with no requests = %+v; want zero", z)
	}
}

func TestPlanRows(t *testing.T) {
	t.Parallel()
	o, err := parseFlags([]string{"-rows", `^locked @`, "-strategies", "locked,conditional"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range plan(o) {
		got = append(got, c.label())
	}
	want := []string{
		"ceiling (constant answer) @1000 VUs", "locked @1000 VUs", "ceiling (constant answer) @1000 VUs",
		"ceiling (constant answer) @2000/s", "locked @2000/s", "ceiling (constant answer) @2000/s",
		"ceiling (constant answer) @10000 conns", "locked @10000 conns", "ceiling (constant answer) @10000 conns",
		"ceiling (constant answer) @50 VUs", "locked @50 VUs",
	}
	if !slices.Equal(got, want) {
		t.Errorf("plan(-rows '^locked @') =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	o, err = parseFlags([]string{"-rate", "0", "-held", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan(o) {
		if c.rate != 0 || c.held != 0 {
			t.Errorf("plan(-rate 0 -held 0) has open-load or held case %s", c.label())
		}
	}
}

func TestParseVariants(t *testing.T) {
	t.Parallel()
	vs, err := parseVariants("no linger:SECKILL_ORDER_LINGER=0; big:SECKILL_ORDER_BATCH_MAX=512,SECKILL_LOCK_HOLD_MAX=0")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].label != "no linger" || len(vs[1].env) != 2 || vs[1].env[1] != "SECKILL_LOCK_HOLD_MAX=0" {
		t.Errorf("parseVariants = %+v", vs)
	}
	for _, bad := range []string{"nolabel", ":SECKILL_X=1", "x:PATH=/tmp", "x:SECKILL_X"} {
		if _, err := parseVariants(bad); err == nil {
			t.Errorf("parseVariants(%q) = nil error; want one", bad)
		}
	}
}
