// Package database opens the SQL store (MySQL/MariaDB, or the quick
// start's embedded SQLite) through GORM and migrates it with goose.
package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckill/seckill/internal/mysqlerr"
	"github.com/seckill/seckill/migrations"
)

// Options configures the connection pool.
type Options struct {
	MaxOpenConns int
	MaxIdleConns int
	ConnMaxLife  time.Duration
	IOTimeout    time.Duration // each read and write of a connection, unless the DSN sets its own; 0: none
	Observer     Observer      // nil: nobody hears of refused connections
	// Guard retires the pool's connections when a server refuses a write
	// as read-only; nil: one of its own.
	Guard *PrimaryGuard
}

// Observer hears of the connections the server refused.
type Observer interface {
	// ConnRefused is called when the server refused a new connection
	// because it has too many (max_connections, max_user_connections).
	ConnRefused()
}

// ErrTooManyConnections marks a connection the server refused because it
// has too many: the pools of every instance together outgrow the server's
// max_connections (see docs/operations.md).
var ErrTooManyConnections = errors.New("database: the server refused a connection: too many connections")

// refusalCounter is a driver.Connector that tells its observer of each
// connection the server refuses for having too many.
type refusalCounter struct {
	driver.Connector
	obs Observer
}

func (c refusalCounter) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	var myErr *mysql.MySQLError
	if err != nil && errors.As(err, &myErr) && (myErr.Number == mysqlerr.TooManyConnections || myErr.Number == mysqlerr.TooManyUserConnections) {
		if c.obs != nil {
			c.obs.ConnRefused()
		}
		err = fmt.Errorf("%w: %w", ErrTooManyConnections, err)
	}
	return conn, err
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
	if mc.ReadTimeout == 0 {
		mc.ReadTimeout = opt.IOTimeout
	}
	if mc.WriteTimeout == 0 {
		mc.WriteTimeout = opt.IOTimeout
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("database: invalid mysql dsn: %w", err)
	}
	guard := opt.Guard
	if guard == nil {
		guard = NewPrimaryGuard()
	}
	guard.Connector = refusalCounter{Connector: connector, obs: opt.Observer}
	sqlDB := sql.OpenDB(guard)
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: sqlDB, DSNConfig: mc, DSN: mc.FormatDSN()}), gormConfig())
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("database: open mysql %s@%s/%s: %w", mc.User, mc.Addr, mc.DBName, err)
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
// migrations of db's dialect, and writes what it did for a human to out:
// the migrations applied (or that none was pending), or a status table.
func Migrate(ctx context.Context, db *gorm.DB, command string, out io.Writer) error {
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
		report(out, "applied", res)
		if err == nil && len(res) == 0 {
			v, verr := p.GetDBVersion(ctx)
			if verr != nil {
				return wrap(verr)
			}
			fmt.Fprintf(out, "nothing to apply: the database is at version %d, the latest\n", v)
		}
		return wrap(err)
	case "down":
		res, err := p.Down(ctx)
		if res != nil {
			report(out, "rolled back", []*goose.MigrationResult{res})
		}
		if errors.Is(err, goose.ErrNoNextVersion) {
			fmt.Fprintln(out, "nothing to roll back: no migration is applied")
			return nil
		}
		return wrap(err)
	case "status":
		st, err := p.Status(ctx)
		if err != nil {
			return wrap(err)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tMIGRATION\tSTATE\tAPPLIED AT (UTC)")
		for _, s := range st {
			at := "-"
			if !s.AppliedAt.IsZero() {
				at = s.AppliedAt.UTC().Format("2006-01-02 15:04:05")
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, filepath.Base(s.Source.Path), s.State, at)
		}
		return tw.Flush()
	}
	return fmt.Errorf("migrate: unknown command %q: want up, down or status", command)
}

func report(out io.Writer, verb string, res []*goose.MigrationResult) {
	for _, r := range res {
		if r == nil {
			continue
		}
		fmt.Fprintf(out, "%s %s (%s)\n", verb, filepath.Base(r.Source.Path), r.Duration.Round(time.Millisecond))
	}
}

func wrap(err error) error {
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// OpenReplica opens a small pool to one of the primary's replicas, for
// the confirmation of commits (repository.Replicas): three connections,
// two waits and one probe, each read bounded by wait plus a margin. It
// returns the replica's address, which names it in logs and readiness
// without the DSN's credentials.
func OpenReplica(dsn string, wait time.Duration) (*sql.DB, string, error) {
	return OpenReplicaAt(dsn, "", wait)
}

// OpenReplicaAt is OpenReplica at addr (host:port) with dsn's other
// parts, for a replica the primary lists; addr "" keeps dsn's.
func OpenReplicaAt(dsn, addr string, wait time.Duration) (*sql.DB, string, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, "", errors.New("database: a replica DSN does not parse") // the DSN may hold a password
	}
	if addr != "" {
		mc.Net, mc.Addr = "tcp", addr
	}
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.InterpolateParams = true
	mc.MultiStatements = true // the wait and the replica's state in one round trip
	if mc.Timeout == 0 {
		mc.Timeout = min(2*time.Second, max(wait, 100*time.Millisecond))
	}
	if mc.ReadTimeout == 0 {
		mc.ReadTimeout = wait + 2*time.Second
	}
	if mc.WriteTimeout == 0 {
		mc.WriteTimeout = wait + 2*time.Second
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, "", errors.New("database: a replica DSN is not usable")
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(3)
	db.SetMaxIdleConns(3)
	db.SetConnMaxLifetime(5 * time.Minute)
	return db, mc.Addr, nil
}
