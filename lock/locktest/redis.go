package locktest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProc is a private redis-server (or redis-server --sentinel).
type RedisProc struct {
	Addr string // 127.0.0.1:Port
	Port int
	Dir  string // its files: the log, a cluster's nodes.conf

	proc Process
}

// StartRedis starts redis-server on a free loopback port, its files in a
// new directory under dir, with args added to the usual ones (no
// persistence: a restart comes back empty), and waits until it answers
// PING. A server that exits before it answers (another process took its
// port, or with --cluster-enabled its bus port, the port + 10000) is
// started again on another port, at most three times.
func StartRedis(ctx context.Context, dir string, args ...string) (*RedisProc, error) {
	return startRedis(ctx, dir, func(p *RedisProc) ([]string, error) {
		return append([]string{"--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", p.Dir}, args...), nil
	})
}

// startRedis starts redis-server with the arguments args gives for its
// port and directory.
func startRedis(ctx context.Context, dir string, args func(*RedisProc) ([]string, error)) (*RedisProc, error) {
	var p *RedisProc
	var err error
	for range 3 {
		p = &RedisProc{}
		if p.Port, err = FreePort(); err != nil {
			return nil, err
		}
		p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port))
		if p.Dir, err = os.MkdirTemp(dir, "redis-"); err != nil {
			return nil, err
		}
		p.proc = Process{Path: "redis-server", Log: filepath.Join(p.Dir, "redis.log"), Ready: p.ping}
		if p.proc.Args, err = args(p); err != nil {
			return nil, err
		}
		if err = p.Restart(ctx); !errors.Is(err, ErrExited) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// StartRedisT is StartRedis in the test's temporary directory, killed when
// the test ends. Without redis-server the test is skipped, unless make
// test runs it (RedisAddrSet).
func StartRedisT(t testing.TB, args ...string) *RedisProc {
	t.Helper()
	p, err := StartRedis(context.Background(), t.TempDir(), args...)
	must(t, err)
	t.Cleanup(p.Kill)
	return p
}

// must fails t with err, or skips it when errSkip.
func must(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errSkip(err):
		t.Skip(err)
	default:
		t.Fatal(err)
	}
}

func (p *RedisProc) ping(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
	defer c.Close()
	return c.Ping(ctx).Err()
}

// Restart starts the server again on its port (after Kill), empty, and
// waits until it answers.
func (p *RedisProc) Restart(ctx context.Context) error { return p.proc.Start(ctx, 10*time.Second) }

// Kill sends SIGKILL (a crash: nothing is flushed, nothing is handed over)
// and waits for the process to exit.
func (p *RedisProc) Kill() { p.proc.Kill() }

// Pid returns the server's process id, 0 when it does not run.
func (p *RedisProc) Pid() int { return p.proc.Pid() }

// Alive reports whether the server runs.
func (p *RedisProc) Alive() bool { return p.proc.Alive() }

// Client returns a go-redis client of p, closed when the test ends.
func (p *RedisProc) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}
