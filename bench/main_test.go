package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.accessLog || o.vus != 1000 || o.lowVUs != 50 || o.duration != 10*time.Second || len(o.strategies) != 5 {
		t.Errorf("defaults = %+v; want the access-log pair on, 1000/50 VUs, 10s, 5 strategies", o)
	}
	o, err = parseFlags([]string{"-access-log=false", "-duration", "3s", "-strategies", "locked"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.accessLog || o.duration != 3*time.Second || len(o.strategies) != 1 {
		t.Errorf("parsed %+v; want no access-log pair, 3s, one strategy", o)
	}
	for _, args := range [][]string{{"-duration", "soon"}, {"-nope"}, {"extra"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) = nil error; want one", args)
		}
	}
}

// TestAccessLogRatio: the access log's cost is the ratio of the on and off
// rows of the same run.
func TestAccessLogRatio(t *testing.T) {
	t.Parallel()
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rows := []row{
		{Case: caseAccessOff, VUs: o.vus, OrdersPerSec: 1000, P99: 10},
		{Case: caseAccessOn, VUs: o.vus, OrdersPerSec: 900, P99: 12},
	}
	var b bytes.Buffer
	writeTable(&b, rows, o)
	want := map[string]string{
		"access log on / off, orders/s @1000 (log level info)": "0.90×",
		"access log on / off, p99 @1000 (log level info)":      "1.20×",
	}
	for _, line := range strings.Split(b.String(), "\n") {
		for label, ratio := range want {
			if rest, ok := strings.CutPrefix(line, label); ok {
				if got := strings.TrimSpace(rest); got != ratio {
					t.Errorf("%s = %q; want %s", label, got, ratio)
				}
				delete(want, label)
			}
		}
	}
	for label := range want {
		t.Errorf("the table has no %q line:\n%s", label, b.String())
	}
}

// TestZooKeeperRatio: the ZooKeeper backend is quoted as a ratio to the
// locked strategy on Redis, of the same run.
func TestZooKeeperRatio(t *testing.T) {
	t.Parallel()
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.zookeeper {
		t.Error("the zookeeper case is off by default; want on")
	}
	rows := []row{
		{Case: "locked", VUs: o.vus, OrdersPerSec: 1000, P99: 10},
		{Case: caseZooKeeper, VUs: o.vus, OrdersPerSec: 800, P99: 15},
	}
	var b bytes.Buffer
	writeTable(&b, rows, o)
	for label, ratio := range map[string]string{
		"locked on zookeeper / on redis, orders/s @1000": "0.80×",
		"locked on zookeeper / on redis, p99 @1000":      "1.50×",
	} {
		i := strings.Index(b.String(), label)
		if i < 0 {
			t.Errorf("the table has no %q line:\n%s", label, b.String())
			continue
		}
		line, _, _ := strings.Cut(b.String()[i+len(label):], "\n")
		if got := strings.TrimSpace(line); got != ratio {
			t.Errorf("%s = %q; want %s", label, got, ratio)
		}
	}
}
