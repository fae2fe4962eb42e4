package database

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/mysqlerr"
)

// A server that refuses a write as read-only (1290) is not the primary:
// a demoted primary after a failover, reached by connections opened
// before the address moved. conn_max_life would keep them for minutes,
// each one failing its writes. PrimaryGuard ends them at once: the first
// refusal retires every connection opened so far, for GORM's statements
// and the batch commit's alike, and the pool dials afresh, through the
// address as it is now.
type PrimaryGuard struct {
	driver.Connector              // set by OpenMySQL
	gen              atomic.Int64 // bumped when a connection meets a read-only server
	seen             atomic.Int64 // read-only refusals met
}

// NewPrimaryGuard returns a guard for one OpenMySQL pool (Options.Guard).
func NewPrimaryGuard() *PrimaryGuard { return &PrimaryGuard{} }

// ReadOnlyRefusals counts the writes a read-only server refused.
func (g *PrimaryGuard) ReadOnlyRefusals() int64 { return g.seen.Load() }

// Connect opens a connection of the current generation.
func (g *PrimaryGuard) Connect(ctx context.Context) (driver.Conn, error) {
	gen := g.gen.Load()
	c, err := g.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &guardedConn{Conn: c, g: g, gen: gen}, nil
}

// Retire ends every connection opened so far: each is closed instead of
// reused.
func (g *PrimaryGuard) Retire() { g.gen.Add(1) }

// check retires the pool's connections when err is a read-only refusal,
// and returns err.
func (g *PrimaryGuard) check(err error) error {
	var myErr *mysql.MySQLError
	if err != nil && errors.As(err, &myErr) && myErr.Number == mysqlerr.ReadOnly {
		g.seen.Add(1)
		g.Retire()
	}
	return err
}

// guardedConn is a driver connection that reports read-only refusals to
// its guard and is not reused once its generation is retired. It offers
// what the MySQL driver's connection offers, so database/sql and the
// batch commit's Raw access see no difference.
type guardedConn struct {
	driver.Conn
	g   *PrimaryGuard
	gen int64
}

var (
	_ driver.ExecerContext      = (*guardedConn)(nil)
	_ driver.QueryerContext     = (*guardedConn)(nil)
	_ driver.ConnPrepareContext = (*guardedConn)(nil)
	_ driver.ConnBeginTx        = (*guardedConn)(nil)
	_ driver.Pinger             = (*guardedConn)(nil)
	_ driver.SessionResetter    = (*guardedConn)(nil)
	_ driver.Validator          = (*guardedConn)(nil)
	_ driver.NamedValueChecker  = (*guardedConn)(nil)
)

func (c *guardedConn) retired() bool { return c.g.gen.Load() != c.gen }

func (c *guardedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if ex, ok := c.Conn.(driver.ExecerContext); ok {
		res, err := ex.ExecContext(ctx, query, args)
		return res, c.g.check(err)
	}
	return nil, driver.ErrSkip
}

func (c *guardedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.Conn.(driver.QueryerContext); ok {
		rows, err := q.QueryContext(ctx, query, args)
		return rows, c.g.check(err)
	}
	return nil, driver.ErrSkip
}

func (c *guardedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c *guardedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("database: the driver cannot begin a transaction with options")
	}
	tx, err := b.BeginTx(ctx, opts)
	return tx, c.g.check(err)
}

func (c *guardedConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// ResetSession refuses a retired connection before its reuse:
// database/sql closes it and takes another.
func (c *guardedConn) ResetSession(ctx context.Context) error {
	if c.retired() {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid keeps a retired connection out of the pool when it is returned.
func (c *guardedConn) IsValid() bool {
	if c.retired() {
		return false
	}
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *guardedConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
