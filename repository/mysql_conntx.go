package repository

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/service"
)

// rollbackTimeout bounds the ROLLBACK of a transaction that did not commit.
const rollbackTimeout = time.Second

// connTx is a transaction on one pooled connection whose START
// TRANSACTION rides with its first statements, sparing BeginTx's round
// trip. As with database/sql, no connection returns to the pool with a
// transaction open (end).
//
// Its row-lock wait is its own: set in the round trip that begins it and
// put back to the server's default in the one that ends it (COMMIT or
// ROLLBACK), so the statements that later draw the connection (GORM's:
// restock, edits, pay, cancel, expiry, the COMMIT read-back) wait as the
// server's default says, bounded by their own context, and no round trip
// is added.
type connTx struct {
	conn    *sql.Conn
	sess    *session // what the connection's session holds of ours
	wait    lockWait // the lock wait this transaction's begin sets
	open    bool     // START TRANSACTION may have run, and neither COMMIT nor ROLLBACK has
	waitSet bool     // the begin may have set wait on the session: the end puts the default back

	at *service.Commit // set: COMMIT reads where it committed into it (sendCommit)
}

// beginning is the statements that start the transaction, sent with its
// first ones: START TRANSACTION, and its lock wait unless that is the
// server's default.
func (t *connTx) beginning() string {
	if t.wait <= 0 {
		return "START TRANSACTION; "
	}
	t.waitSet = true
	return "START TRANSACTION; SET SESSION innodb_lock_wait_timeout = " + t.wait.String() + "; "
}

// ending is s (COMMIT or ROLLBACK), after the statement that puts the
// session's lock wait back to the server's default when the begin set
// one: in that order, a failed SET leaves the transaction open, never
// committed unreported.
func (t *connTx) ending(s string) string {
	if !t.waitSet {
		return s
	}
	return "SET SESSION innodb_lock_wait_timeout = DEFAULT; " + s
}

// begin sends query, which must start with beginning(), as one
// multi-statement of reads.
func (t *connTx) begin(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.open = true // even a failed query may have started the transaction
	return t.conn.QueryContext(ctx, query, args...)
}

// query returns a read on t's connection, inside its transaction.
func (t *connTx) query(ctx context.Context) func(string, ...any) (*sql.Rows, error) {
	return func(q string, args ...any) (*sql.Rows, error) { return t.conn.QueryContext(ctx, q, args...) }
}

// beginExec sends query, which must start with beginning(), as one
// multi-statement of writes (see exec).
func (t *connTx) beginExec(ctx context.Context, query string, args ...any) (mysql.Result, error) {
	t.open = true
	return t.exec(ctx, query, args...)
}

// exec runs a multi-statement of writes and returns each statement's rows
// affected and last insert id (database/sql keeps only the last's),
// sparing SELECT ROW_COUNT() and LAST_INSERT_ID(). The first failing
// statement ends it with its error.
func (t *connTx) exec(ctx context.Context, query string, args ...any) (mysql.Result, error) {
	var res mysql.Result
	err := t.conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return errors.New("repository: the driver cannot execute on a connection")
		}
		named := make([]driver.NamedValue, len(args))
		for i, a := range args {
			named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
			// database/sql converts arguments before the driver sees
			// them; Raw leaves that to us, as the driver's own checker.
			if c, ok := dc.(driver.NamedValueChecker); ok {
				if err := c.CheckNamedValue(&named[i]); err != nil {
					return err
				}
			}
		}
		r, err := ex.ExecContext(ctx, query, named)
		if err != nil {
			return err
		}
		if res, ok = r.(mysql.Result); !ok {
			return errors.New("repository: the driver does not report each statement's result")
		}
		return nil
	})
	return res, err
}

// commit commits unless ctx has ended (end rolls back), as Tx.Commit
// does. Once sent, COMMIT ignores ctx's cancellation, so a leaving buyer
// never cuts it in half, but keeps its deadline (else commitTimeout); a
// COMMIT cut there returns errCommitTimedOut and is read back as a lost
// reply is.
func (t *connTx) commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(commitTimeout)
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if err := t.sendCommit(cctx); err != nil {
		if cctx.Err() != nil {
			return fmt.Errorf("%w: %w", errCommitTimedOut, err)
		}
		return err
	}
	t.open, t.waitSet = false, false
	return nil
}

// commitTimeout bounds a COMMIT whose context has no deadline.
const commitTimeout = 5 * time.Second

// errCommitTimedOut is a COMMIT that got no reply by its deadline: it may
// have committed.
var errCommitTimedOut = errors.New("repository: no reply to COMMIT by its deadline")

// end rolls back a transaction that did not commit and returns the
// connection to the pool, or closes it when the rollback failed, so no
// one finds the transaction open or its lock wait set.
func (t *connTx) end() {
	if t.open || t.waitSet {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		_, err := t.conn.ExecContext(ctx, t.ending("ROLLBACK"))
		cancel()
		if err != nil {
			_ = t.conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
		}
		t.open, t.waitSet = false, false
	}
	_ = t.conn.Close()
}

// session is what a pooled connection's server session holds for us:
// auto_increment_increment, read once. It relies on the driver never
// resetting a session (go-sql-driver/mysql sends no
// COM_RESET_CONNECTION). Only the connection's holder uses it.
type session struct {
	step int64 // auto_increment_increment; 0 until read
}

// maxSessions caps the sessions remembered when the pool is unbounded
// (else twice its size). Remembered sessions pin their driver
// connections, so at the cap all are forgotten and asked again.
const maxSessions = 1024

// sessions remembers the session of each pooled connection of db, by its
// driver connection.
type sessions struct {
	db *sql.DB
	mu sync.Mutex
	m  map[any]*session
}

// of returns conn's session, empty when it is new to us.
func (ss *sessions) of(conn *sql.Conn) (*session, error) {
	var dc any
	if err := conn.Raw(func(c any) error { dc = c; return nil }); err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.m[dc]; s != nil {
		return s, nil
	}
	limit := maxSessions
	if n := ss.db.Stats().MaxOpenConnections; n > 0 {
		limit = 2 * n
	}
	if ss.m == nil || len(ss.m) >= limit {
		ss.m = make(map[any]*session)
	}
	s := &session{}
	ss.m[dc] = s
	return s, nil
}

// autoIncrementStep is the step between the ids of one multi-row INSERT
// on t's connection.
func (t *connTx) autoIncrementStep(ctx context.Context) (int64, error) {
	if t.sess.step == 0 {
		if err := t.conn.QueryRowContext(ctx, "SELECT @@SESSION.auto_increment_increment").Scan(&t.sess.step); err != nil {
			return 0, err
		}
	}
	return t.sess.step, nil
}
