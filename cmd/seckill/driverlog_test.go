package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// TestDriverMessagesAreJSON (issue 46 g): what the MySQL driver itself
// prints (here a server that hangs up in the handshake, as a primary
// does when it dies) is a line of the service's JSON log, never plain
// text in the middle of it. Not parallel: the driver's logger is one per
// process.
func TestDriverMessagesAreJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close() // gone before the handshake
		}
	}()
	var stdout, stderr bytes.Buffer
	getenv := env(map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(" + ln.Addr().String() + ")/x"})
	if err := run(context.Background(), []string{"audit"}, getenv, &stdout, &stderr); err == nil {
		t.Fatal("audit against a server that hangs up succeeded")
	}
	driver := 0
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		if rec["msg"] == "mysql driver" {
			driver++
		}
	}
	if driver == 0 {
		t.Errorf("the driver's message did not reach the log; stderr:\n%s", stderr.String())
	}
}
