package repository

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// rollbackTimeout bounds the ROLLBACK of a transaction that did not commit.
const rollbackTimeout = time.Second

// connTx is a transaction on one pooled connection whose START TRANSACTION
// travels with its first statements, sparing the round trip of
// database/sql's BeginTx (and its goroutine). It keeps database/sql's
// promise that a connection goes back to the pool with no transaction
// open: end rolls back whatever did not commit, and discards a
// connection on which even that failed.
type connTx struct {
	conn *sql.Conn
	open bool // START TRANSACTION may have run, and neither COMMIT nor ROLLBACK has
}

// begin sends START TRANSACTION followed by more statements, as one
// multi-statement: query must begin with it.
func (t *connTx) begin(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.open = true // even a failed query may have started the transaction
	return t.conn.QueryContext(ctx, query, args...)
}

// commit commits, as database/sql's Tx.Commit does: not at all once ctx
// has ended (the rollback follows in end), and otherwise to its answer,
// whatever ctx does meanwhile, so that a buyer's leaving never cuts a
// COMMIT in half.
func (t *connTx) commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := t.conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		return err
	}
	t.open = false
	return nil
}

// end rolls back a transaction that did not commit and returns the
// connection to the pool; a connection that could not be rolled back is
// closed instead, so that no one else finds the transaction open.
func (t *connTx) end() {
	if t.open {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		_, err := t.conn.ExecContext(ctx, "ROLLBACK")
		cancel()
		if err != nil {
			_ = t.conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
		}
		t.open = false
	}
	_ = t.conn.Close()
}
