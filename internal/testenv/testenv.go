// Package testenv gives tests real dependencies, isolated: a fresh MariaDB
// database per test, a key prefix per test on the shared Redis, and a
// private redis-server on a free port for tests that stop or fail Redis.
//
// SECKILL_TEST_MYSQL_DSN (default "root@tcp(127.0.0.1:3306)/") and
// SECKILL_TEST_REDIS_ADDR (default "127.0.0.1:6379") point at the servers;
// make test sets both to throwaway servers of its own
// (scripts/with-test-servers.sh).
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
)

// MySQLDSN returns the DSN of the test server, without a database.
func MySQLDSN() string {
	if v := os.Getenv("SECKILL_TEST_MYSQL_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// RedisAddr returns the address of the shared test Redis.
func RedisAddr() string {
	if v := os.Getenv("SECKILL_TEST_REDIS_ADDR"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

// Name returns a unique lowercase name with the given prefix.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Database creates a fresh, migrated database and returns its DSN; the
// database is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	mc, err := mysql.ParseDSN(MySQLDSN())
	if err != nil {
		t.Fatalf("SECKILL_TEST_MYSQL_DSN: %v", err)
	}
	name := Name("seckill_test_")
	admin, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database (is MariaDB running on %s?): %v", mc.Addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	mc.DBName = name
	dsn := mc.FormatDSN()
	db := DB(t, dsn)
	if err := database.Migrate(ctx, db, "up", io.Discard); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dsn
}

// Pool is the connections one test's pool of a database may open. Group commit needs few,
// and the whole suite, packages and tests in parallel, must fit a default
// MariaDB's max_connections (151) beside whatever else uses the server.
const Pool = 8

// DB opens dsn through GORM, closed when the test ends.
func DB(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	db, err := database.OpenMySQL(dsn, database.Options{MaxOpenConns: Pool, MaxIdleConns: Pool, ConnMaxLife: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(db) })
	return db
}

// Redis returns a client of the shared Redis and a key prefix of the
// test's own. Tests on it must not stop, flush or fail the server.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr()})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v", RedisAddr(), err)
	}
	return c, Name("test:") + ":"
}

// RedisServer is a private redis-server process.
type RedisServer struct {
	Addr string
	cmd  *exec.Cmd
	port int
	dir  string
	t    testing.TB
}

// StartRedis starts a redis-server on a free loopback port, stopped when
// the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	s := &RedisServer{t: t, dir: t.TempDir(), port: FreePort(t)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start (re)starts the server on its port and waits until it answers PING.
func (s *RedisServer) Start() {
	s.t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		s.t.Fatalf("redis-server not found: %v", err)
	}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer within 10s", s.Addr)
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness, bounded above
	}
}

// Stop kills the server (as a crash would) and waits for it to exit.
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
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

// Logger returns a logger that writes warnings to stderr when
// SECKILL_TEST_LOG is set and nowhere otherwise.
func Logger() *slog.Logger {
	if os.Getenv("SECKILL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}
