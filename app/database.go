package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/metrics"
	"github.com/seckill/seckill/repository"
)

// Migrate runs a migration command against the configured database and
// writes what it did to out.
func Migrate(ctx context.Context, cfg config.Config, command string, out io.Writer) error {
	if cfg.Embedded() {
		return errors.New("migrate: SECKILL_MYSQL_DSN (mysql.dsn) is required; the embedded store migrates itself")
	}
	opt := dbOptions(cfg)
	opt.IOTimeout = 0 // an ALTER of a large table may rightly run for long
	db, err := database.OpenMySQL(cfg.MySQL.DSN, opt)
	if err != nil {
		return err
	}
	defer database.Close(db)
	return database.Migrate(ctx, db, command, out)
}

func dbOptions(cfg config.Config) database.Options {
	return database.Options{MaxOpenConns: cfg.MySQL.MaxOpenConns, MaxIdleConns: cfg.MySQL.MaxIdleConns, ConnMaxLife: cfg.MySQL.ConnMaxLife,
		IOTimeout: cfg.MySQL.IOTimeout}
}

// openDatabase opens MySQL, or in embedded mode a migrated SQLite file in
// a temporary directory removed at exit.
func openDatabase(ctx context.Context, cfg config.Config, obs database.Observer, guard *database.PrimaryGuard, cl *closers) (*gorm.DB, error) {
	if !cfg.Embedded() {
		opt := dbOptions(cfg)
		opt.Observer, opt.Guard = obs, guard
		db, err := database.OpenMySQL(cfg.MySQL.DSN, opt)
		if err != nil {
			return nil, err
		}
		cl.add(func() error { return database.Close(db) })
		return db, nil
	}
	dir, err := os.MkdirTemp("", "seckill-quickstart-")
	if err != nil {
		return nil, err
	}
	cl.add(func() error { return os.RemoveAll(dir) })
	db, err := database.OpenSQLite(filepath.Join(dir, "seckill.db"))
	if err != nil {
		return nil, err
	}
	cl.add(func() error { return database.Close(db) })
	if err := database.Migrate(ctx, db, "up", io.Discard); err != nil {
		return nil, err
	}
	return db, nil
}

// openReplicas starts confirming commits on mysql.replicas; nil without
// any. The pools of the replicas close with it.
func openReplicas(cfg config.Config, db *gorm.DB, guard *database.PrimaryGuard, mx *metrics.Metrics, log *slog.Logger, cl *closers) (*repository.Replicas, error) {
	if len(cfg.MySQL.Replicas) == 0 || cfg.Embedded() {
		return nil, nil
	}
	var nodes []repository.ReplicaConfig
	for i, dsn := range cfg.MySQL.Replicas {
		rdb, addr, err := database.OpenReplica(dsn, cfg.MySQL.ReplicaTimeout)
		if err != nil {
			for _, n := range nodes {
				n.DB.Close()
			}
			return nil, fmt.Errorf("mysql.replicas item %d: %w", i+1, err)
		}
		nodes = append(nodes, repository.ReplicaConfig{DB: rdb, Addr: addr})
	}
	primary, err := db.DB()
	if err != nil {
		return nil, err
	}
	first := cfg.MySQL.Replicas[0]
	open := func(addr string) (*sql.DB, error) { // a replica found on the primary: the list's credentials
		rdb, _, err := database.OpenReplicaAt(first, addr, cfg.MySQL.ReplicaTimeout)
		return rdb, err
	}
	repl := repository.NewReplicas(repository.ReplicasConfig{Nodes: nodes, Min: cfg.MySQL.MinReplicas, Timeout: cfg.MySQL.ReplicaTimeout,
		Primary: primary, Retire: guard, Open: open, Obs: mx, Log: log})
	cl.add(repl.Close)
	if err := mx.Register(newReplicationCollector(repl)); err != nil {
		return nil, err
	}
	return repl, nil
}

// registerPool exports db's pool statistics.
func registerPool(mx *metrics.Metrics, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return mx.Pool(sqlDB)
}

// SetMySQLLogger sends the MySQL driver's own messages (a connection cut
// mid-packet during a failover, say) to log instead of stderr, so that
// the log stays one JSON stream. The driver has one logger per process,
// read without a lock: it is set once, to a forwarder that reads log
// atomically, so that each run (tests run several at once) may set its
// own.
func SetMySQLLogger(log *slog.Logger) {
	mysqlLog.Store(log)
	mysqlLogOnce.Do(func() { _ = mysql.SetLogger(mysqlLogger{}) }) // it refuses only nil
}

var (
	mysqlLog     atomic.Pointer[slog.Logger]
	mysqlLogOnce sync.Once
)

type mysqlLogger struct{}

func (mysqlLogger) Print(v ...any) {
	mysqlLog.Load().Warn("mysql driver", "detail", strings.TrimSpace(fmt.Sprint(v...)))
}
