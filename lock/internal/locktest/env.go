// Package locktest is what the lock module's tests share with those of its
// ZooKeeper client (lock/zookeeper): the lock contract written once (Run),
// the address of the shared test Redis, and private redis-servers, Sentinel
// groups, Clusters and TCP proxies started on free loopback ports and
// stopped when the test ends. It depends on nothing outside the lock
// module, so the lock's tests run wherever the lock is built.
package locktest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"testing"
)

// RedisAddr returns the address of the shared test Redis: SECKILL_TEST_REDIS_ADDR,
// or 127.0.0.1:6379. Tests on it must not stop, flush or fail the server.
func RedisAddr() string {
	if v := os.Getenv("SECKILL_TEST_REDIS_ADDR"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

// RedisAddrSet reports whether SECKILL_TEST_REDIS_ADDR names the shared
// Redis, as make test does: then a Redis that does not answer is a failure,
// not a reason to skip.
func RedisAddrSet() bool { return os.Getenv("SECKILL_TEST_REDIS_ADDR") != "" }

// Name returns a unique lowercase name with the given prefix.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
