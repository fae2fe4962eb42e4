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
	"cmp"
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv/mariadb"
	"github.com/seckill/seckill/lock/locktest"
)

// MySQLDSN returns the DSN of the test server, without a database.
func MySQLDSN() string {
	return cmp.Or(os.Getenv("SECKILL_TEST_MYSQL_DSN"), "root@tcp(127.0.0.1:3306)/")
}

// RedisAddr returns the address of the shared test Redis.
func RedisAddr() string { return locktest.RedisAddr() }

// Name returns a unique lowercase name with the given prefix.
func Name(prefix string) string { return locktest.Name(prefix) }

// Database creates a fresh, migrated database and returns its DSN; the
// database is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	name := Name("seckill_test_")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dsn, err := mariadb.CreateDatabase(ctx, MySQLDSN(), name)
	if err != nil {
		t.Fatal(err)
	}
	db := DB(t, dsn)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := db.WithContext(ctx).Exec("DROP DATABASE " + name).Error; err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
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
	*locktest.RedisProc
	t testing.TB
}

// StartRedis starts a redis-server on a free loopback port, stopped when
// the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	return &RedisServer{locktest.StartRedisT(t), t}
}

// Start starts the server again on its port, empty, and waits until it
// answers PING.
func (s *RedisServer) Start() {
	s.t.Helper()
	if err := s.Restart(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// Stop kills the server (as a crash would) and waits for it to exit.
func (s *RedisServer) Stop() { s.Kill() }

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := locktest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Logger returns a logger that writes warnings to stderr when
// SECKILL_TEST_LOG is set and nowhere otherwise.
func Logger() *slog.Logger {
	if os.Getenv("SECKILL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}
