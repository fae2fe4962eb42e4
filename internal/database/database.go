// Package database opens the SQL store (MySQL/MariaDB, or the quick
// start's embedded SQLite) through GORM and migrates it with goose.
package database

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckill/seckill/migrations"
)

// Options configures the connection pool.
type Options struct {
	MaxOpenConns int
	MaxIdleConns int
	ConnMaxLife  time.Duration
}

// OpenMySQL connects to MySQL or MariaDB. The DSN is completed with what
// the store relies on: parseTime, UTC, and client-side interpolation (one
// round trip per statement instead of prepare + execute + close).
func OpenMySQL(dsn string, opt Options) (*gorm.DB, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("database: invalid mysql dsn: %w", err)
	}
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.InterpolateParams = true
	mc.MultiStatements = true // the batch commit sends its reads, and its writes, in one round trip each
	if mc.Timeout == 0 {
		mc.Timeout = 2 * time.Second
	}
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{DSNConfig: mc, DSN: mc.FormatDSN()}), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("database: open mysql %s@%s/%s: %w", mc.User, mc.Addr, mc.DBName, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(opt.MaxOpenConns)
	sqlDB.SetMaxIdleConns(opt.MaxIdleConns)
	sqlDB.SetConnMaxLifetime(opt.ConnMaxLife)
	return db, nil
}

// OpenSQLite opens (creating it) the embedded store at path. SQLite has
// one writer at a time, so the pool holds one connection.
func OpenSQLite(path string) (*gorm.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_time_format=sqlite"
	db, err := gorm.Open(sqlite.Open(dsn), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("database: open sqlite %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(1)
	return db, nil
}

func gormConfig() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
}

// Close closes the pool behind db.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Migrate runs a goose command ("up", "down", "status") with the embedded
// migrations of db's dialect.
func Migrate(ctx context.Context, db *gorm.DB, command string, log *slog.Logger) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	dialect := goose.DialectMySQL
	dir := "mysql"
	if db.Dialector.Name() == "sqlite" {
		dialect, dir = goose.DialectSQLite3, "sqlite"
	}
	sub, err := fs.Sub(migrations.FS, dir)
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(dialect, sqlDB, sub)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	switch command {
	case "up":
		res, err := p.Up(ctx)
		logResults(log, res)
		return wrap(err)
	case "down":
		res, err := p.Down(ctx)
		if res != nil {
			logResults(log, []*goose.MigrationResult{res})
		}
		if errors.Is(err, goose.ErrNoNextVersion) {
			return nil
		}
		return wrap(err)
	case "status":
		st, err := p.Status(ctx)
		for _, s := range st {
			log.Info("migration", "version", s.Source.Version, "file", filepath.Base(s.Source.Path), "state", string(s.State))
		}
		return wrap(err)
	}
	return fmt.Errorf("migrate: unknown command %q: want up, down or status", command)
}

func logResults(log *slog.Logger, res []*goose.MigrationResult) {
	for _, r := range res {
		if r == nil {
			continue
		}
		log.Info("migrated", "version", r.Source.Version, "direction", r.Direction, "took", r.Duration.Round(time.Millisecond))
	}
}

func wrap(err error) error {
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
