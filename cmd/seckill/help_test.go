package main

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/config"
)

// TestHelp: every way of asking for help succeeds, on stdout, and lists the
// commands and every setting's environment variable.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"help"}} {
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

// TestEveryHelpSucceeds: -h of every command succeeds (exit 0) on stdout,
// nothing on stderr, whatever the configuration says.
func TestEveryHelpSucceeds(t *testing.T) {
	t.Parallel()
	badConfig := func(k string) string {
		if k == "SECKILL_CONFIG" {
			return "/nonexistent/seckill.yaml"
		}
		return ""
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "SECKILL_REDIS_MODE"},
		{[]string{"token", "-h"}, "seckill token -sub USER"},
		{[]string{"token", "--help"}, "seckill token -sub USER"},
		{[]string{"migrate", "-h"}, "migrate up"},
		{[]string{"migrate", "up", "-h"}, "migrate up"},
		{[]string{"healthcheck", "-h"}, "healthcheck"},
		{[]string{"version", "-h"}, "version"},
		{[]string{"serve", "--help"}, "serve"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), tc.args, badConfig, &stdout, &stderr); err != nil {
				t.Fatalf("seckill %s = %v; want success", strings.Join(tc.args, " "), err)
			}
			if !strings.Contains(stdout.String(), tc.want) || stderr.Len() != 0 {
				t.Errorf("seckill %s: stdout %q, stderr %q; want %q on stdout only", strings.Join(tc.args, " "), stdout.String(), stderr.String(), tc.want)
			}
		})
	}
}

// TestEachCommandHasItsOwnHelp: `seckill CMD -h` (or --help) prints CMD's
// own usage, not the global help, on stdout, and succeeds.
func TestEachCommandHasItsOwnHelp(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"serve", "migrate", "healthcheck", "locks", "token", "audit", "version"} {
		for _, h := range []string{"-h", "--help"} {
			t.Run(name+" "+h, func(t *testing.T) {
				t.Parallel()
				var stdout, stderr bytes.Buffer
				if err := run(context.Background(), []string{name, h}, func(string) string { return "" }, &stdout, &stderr); err != nil {
					t.Fatalf("seckill %s %s = %v; want success (exit 0)", name, h, err)
				}
				out := stdout.String()
				if !strings.HasPrefix(out, "Usage: seckill ") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], " "+name) {
					t.Errorf("seckill %s %s: first line %q; want its own usage line", name, h, strings.SplitN(out, "\n", 2)[0])
				}
				if strings.Contains(out, "SECKILL_MYSQL_DSN (") || stderr.Len() != 0 {
					t.Errorf("seckill %s %s printed the global help or wrote to stderr:\n%s\nstderr: %s", name, h, out, stderr.String())
				}
			})
		}
	}
}

// TestVersionFlag: --version and -version print the version, as the
// version command does.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil {
			t.Errorf("seckill %s = %v; want success", args[0], err)
			continue
		}
		if !strings.HasPrefix(stdout.String(), "seckill ") || !strings.Contains(stdout.String(), "revision:") {
			t.Errorf("seckill %s printed %q; want the version", args[0], stdout.String())
		}
	}
}

// TestHelpOnRedis: the help says what several Redis addresses need.
func TestHelpOnRedis(t *testing.T) {
	t.Parallel()
	for _, want := range []string{"SECKILL_REDIS_MODE", "more than one needs SECKILL_REDIS_MODE", "redlock", "sentinel", "cluster", "SECKILL_HTTP_ADMIN_ADDR", "version"} {
		if !strings.Contains(usage, want) {
			t.Errorf("help does not say %q", want)
		}
	}
	if strings.Contains(usage, "more than one: Redlock") {
		t.Error("help says several Redis addresses mean Redlock: without redis.mode they are an error")
	}
}

// TestOneErrorLine: a usage error is returned once, for main to print, and
// nothing is written besides it.
func TestOneErrorLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "flag provided but not defined: -bogus (see seckill -h)"},
		{[]string{"token", "-bogus"}, "token: flag provided but not defined: -bogus (see seckill token -h)"},
		{[]string{"migrate"}, "usage: seckill migrate up|down|status"},
		{[]string{"migrate", "sideways"}, "migrate sideways: want up, down or status (usage: seckill migrate up|down|status)"},
		{[]string{"token", "-sub", strings.Repeat("u", 65)}, "token: -sub is 65 bytes; the server accepts at most 64"},
		{[]string{"token", "-sub", " u-1"}, "must not begin or end with white space"},
		{[]string{"token", "-sub", "u-1\t"}, "must not begin or end with white space"},
		{[]string{"token", "-sub", "u\t6"}, "control characters"},
		{[]string{"token", "-sub", "u\xff6"}, "UTF-8"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			env := func(k string) string {
				if k == "SECKILL_AUTH_JWT_SECRET" {
					return "help-test-secret-0123456789abcdefgh"
				}
				return ""
			}
			err := run(context.Background(), tc.args, env, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("seckill %s = %v; want one line saying %q", strings.Join(tc.args, " "), err, tc.want)
			}
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Errorf("seckill %s also wrote stdout %q, stderr %q; want only the returned error", strings.Join(tc.args, " "), stdout.String(), stderr.String())
			}
		})
	}
	// The longest sub the server takes is minted.
	var stdout bytes.Buffer
	env := func(k string) string {
		if k == "SECKILL_AUTH_JWT_SECRET" {
			return "help-test-secret-0123456789abcdefgh"
		}
		return ""
	}
	if err := run(context.Background(), []string{"token", "-sub", strings.Repeat("u", 64)}, env, &stdout, io.Discard); err != nil || stdout.Len() == 0 {
		t.Errorf("seckill token -sub <64 bytes> = %v; want a token", err)
	}
}

// TestVersion: `seckill version` prints the module version and what the
// build knows of its VCS revision.
func TestVersion(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"version"}, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("seckill version = %v", err)
	}
	for _, want := range []string{"seckill ", "revision: ", "time: ", "modified: ", runtime.Version()} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("seckill version printed %q; want it to say %q", stdout.String(), want)
		}
	}
}
