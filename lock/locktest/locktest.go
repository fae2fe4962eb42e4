// Package locktest starts the servers the lock's tests run against, and
// those of the service and its load test: private redis-servers, Sentinel
// groups and Clusters on free loopback ports, and TCP proxies that cut,
// freeze or move a path. Each Start function takes a context and a
// directory and returns an error, for a program such as the load test;
// its T twin takes a testing.TB, fails the test instead and stops what it
// started when the test ends. It depends on nothing outside the lock
// module, so the lock's tests run wherever the lock is built.
package locktest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// RedisAddr returns the address of the shared test Redis: SECKILL_TEST_REDIS_ADDR,
// or 127.0.0.1:6379. Tests on it must not stop, flush or fail the server.
func RedisAddr() string { return cmp.Or(os.Getenv("SECKILL_TEST_REDIS_ADDR"), "127.0.0.1:6379") }

// RedisAddrSet reports whether SECKILL_TEST_REDIS_ADDR names the shared
// Redis, as make test does: then a Redis that does not answer, or a
// redis-server not installed, is a failure, not a reason to skip.
func RedisAddrSet() bool { return os.Getenv("SECKILL_TEST_REDIS_ADDR") != "" }

// Name returns a unique lowercase name with the given prefix.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// FreePort returns a loopback TCP port that was free a moment ago; a
// server started on it may still find it taken.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ErrGaveUp, wrapped by the error of a Poll function, ends the wait at
// once: what it waits for can no longer happen.
var ErrGaveUp = errors.New("gave up")

// Poll calls f every interval until it returns nil, returns an error
// wrapping ErrGaveUp, or timeout passes; each call has at least a second.
// The error names what was awaited and f's last error.
func Poll(ctx context.Context, what string, timeout, interval time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, max(interval, time.Second))
		err := f(cctx)
		ccancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrGaveUp):
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready after %s: %w", what, timeout, errors.Join(err, ctx.Err()))
		case <-time.After(interval): // polling another process, bounded above
		}
	}
}
