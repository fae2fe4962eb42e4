package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/config"
)

// TestHelp: every way of asking for help succeeds, on stdout, and lists the
// commands and every setting's environment variable.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"help"}, {"serve", "-h"}, {"migrate", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			env := func(string) string { return "" }
			if err := run(context.Background(), args, env, &stdout, &stderr); err != nil {
				t.Fatalf("seckill %s = %v; want success", strings.Join(args, " "), err)
			}
			for _, want := range []string{"serve", "migrate up", "migrate status", "healthcheck", "audit [-sku N] [-json]", "-config", "SECKILL_MYSQL_DSN", "SECKILL_REDIS_ADDRS", "SECKILL_ADMIN_TOKEN", "SECKILL_LOG_ACCESS"} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("help does not mention %s:\n%s", want, stdout.String())
				}
			}
			for _, s := range config.Settings() {
				if !strings.Contains(stdout.String(), s.Env+" ("+s.Key) {
					t.Errorf("help does not list %s (%s)", s.Env, s.Key)
				}
			}
			if stderr.Len() != 0 {
				t.Errorf("help wrote to stderr: %s", stderr.String())
			}
		})
	}
}
