package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/service"
)

// commitMySQL commits one batch per SKU in one transaction of three round
// trips (reads, writes, COMMIT): round trips, not rows, set a small
// batch's cost. A round of known rows tries two first (commitKnown).
//
// A nil error means each member holds its answer, maybe its own error
// (service.ErrOutcomeUnknown: a COMMIT that could not be read back). Any
// other error means nothing was committed.
func (s *MySQL) commitMySQL(ctx context.Context, ms []*member, wait lockWait) error {
	if s.knownUsable(ms) && decideKnown(ms) {
		err := s.commitKnown(ctx, ms, wait)
		if !errors.Is(err, errKnownChanged) {
			return err
		}
	}
	return s.commitRead(ctx, ms, wait)
}

// commitKnown commits what decideKnown decided in two round trips. It
// returns errKnownChanged, committing nothing, when a write proves an
// assumption false.
func (s *MySQL) commitKnown(ctx context.Context, ms []*member, wait lockWait) error {
	tx, err := s.newConnTx(ctx, wait)
	if err != nil {
		return err
	}
	defer tx.end() // rolls back unless committed, then returns the connection
	w := writes{onServer: s.replicas != nil, events: s.events}
	w.q.WriteString(tx.beginning())
	w.add(ms)
	ans, err := w.send(ctx, tx, tx.beginExec)
	if err != nil {
		return knownChanged(err)
	}
	// One affected row per holding inserted, two per holding updated: the
	// decision took every holding to be new.
	if ans.updated != int64(len(ms)) || ans.holdings != int64(w.holders) {
		return errKnownChanged
	}
	ans.numberOrders(ms)
	if err := placeWaiters(ms, tx.query(ctx)); err != nil {
		return err
	}
	if err := s.commitWrites(ctx, tx, ms); err != nil {
		return err
	}
	resolve(ms)
	stampCommit(ms, tx.at)
	for _, m := range ms {
		if m.err == nil {
			m.res.ReadsSkipped = true
		}
	}
	return nil
}

// commitRead commits the members on what it reads first: START
// TRANSACTION with the reads, the writes of the members that sell
// something, then COMMIT.
func (s *MySQL) commitRead(ctx context.Context, ms []*member, wait lockWait) error {
	tx, err := s.newConnTx(ctx, wait)
	if err != nil {
		return err
	}
	defer tx.end() // rolls back unless committed, then returns the connection
	existing, err := s.readMembers(ctx, tx, ms)
	if err != nil {
		return err
	}
	var writers []*member
	for _, m := range ms {
		if m.err != nil {
			continue
		}
		if service.FenceStale(m.sku.Fence, m.b.Fence) {
			m.err = staleFence(m.b, m.sku)
			continue
		}
		m.decide(existing)
		if m.alloc.Writes() {
			writers = append(writers, m)
		}
	}
	if len(writers) > 0 {
		w := writes{events: s.events}
		w.add(writers)
		ans, err := w.send(ctx, tx, tx.exec)
		if err != nil {
			return err
		}
		if ans.updated != int64(len(writers)) {
			return service.ErrConflict
		}
		ans.numberOrders(writers)
		if err := placeWaiters(writers, tx.query(ctx)); err != nil {
			return err
		}
	}
	if err := s.commitWrites(ctx, tx, writers); err != nil {
		return err
	}
	resolve(ms)
	stampCommit(ms, tx.at)
	return nil
}

// newConnTx takes a pooled connection for a transaction whose statements
// wait at most wait for a row lock; it begins with its first statements.
func (s *MySQL) newConnTx(ctx context.Context, wait lockWait) (*connTx, error) {
	conn, err := s.sql.Conn(ctx)
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", service.ErrNoTransaction, err)
		}
		return nil, err
	}
	tx := &connTx{conn: conn, wait: wait}
	if s.replicas != nil {
		tx.at = &service.Commit{}
	}
	if tx.sess, err = s.sessions.of(conn); err != nil {
		tx.end()
		return nil, err
	}
	return tx, nil
}

// commitWrites commits tx. A failed COMMIT that may have landed is
// settled by reading the first order back; when that fails too, the
// writers' answer is service.ErrOutcomeUnknown.
func (s *MySQL) commitWrites(ctx context.Context, tx *connTx, writers []*member) error {
	err := tx.commit(ctx)
	if err == nil || len(writers) == 0 {
		return nil // without writers nothing was written: the reads' answers stand
	}
	if !commitMayHaveLanded(err) {
		return err
	}
	landed, lerr := s.landed(firstOrder(writers), tx.at)
	switch {
	case lerr != nil:
		unknown := fmt.Errorf("%w: COMMIT failed (%w) and reading the order back failed (%w)", service.ErrOutcomeUnknown, err, lerr)
		for _, m := range writers {
			m.err = unknown
		}
	case !landed:
		return err
	}
	return nil
}

// decideKnown decides every member on its known row (b.Known), taking
// every holding as new and every key as unused, and reports whether the
// round may commit so. Every member must write: the writes' guards
// (version, fence, upsert count, unique key) are what check those
// assumptions.
func decideKnown(ms []*member) bool {
	for _, m := range ms {
		if m.b.Known == nil || m.b.Known.ID != m.b.SKUID {
			return false
		}
	}
	for _, m := range ms {
		m.sku, m.held, m.err = rowOf(*m.b.Known), map[string]service.Holding{}, nil
		if service.FenceStale(m.sku.Fence, m.b.Fence) {
			return false // the reads tell which fence is newer
		}
		m.decide(nil)
		if !m.alloc.Writes() || refusesAKey(m) {
			return false
		}
	}
	return true
}

// refusesAKey reports whether m refuses a request with an idempotency
// key: it may replay an earlier order, which only the reads can find.
func refusesAKey(m *member) bool {
	for i, out := range m.alloc.Outcomes {
		if out.Err != nil && m.b.Requests[i].IdempotencyKey != "" {
			return true
		}
	}
	return false
}

// errKnownChanged is a round decided on known rows that its writes found
// changed: it was rolled back, and is decided again on what is read.
var errKnownChanged = errors.New("repository: a known sku row, holding or idempotency key changed")

// lockWait is how long a transaction's statements wait for a row lock, in
// whole seconds (innodb_lock_wait_timeout); 0 is the server's default.
type lockWait int

// sharedLockWait bounds a round's row-lock waits (CommitRound).
const sharedLockWait lockWait = 1

// lockWaitUntil bounds a transaction's row-lock waits by ctx's deadline:
// the driver drops a cancelled caller's connection, but the server keeps
// its rows locked until the wait ends.
func lockWaitUntil(ctx context.Context) lockWait {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return lockWait(max(1, math.Ceil(time.Until(d).Seconds())))
}

func (w lockWait) String() string {
	if w <= 0 {
		return "DEFAULT"
	}
	return strconv.Itoa(int(w))
}

// commitMayHaveLanded reports whether a failed COMMIT may still have
// committed. A server error, or database/sql refusing an ended context,
// says it did not; a lost connection cannot say.
func commitMayHaveLanded(err error) bool {
	if errors.Is(err, errCommitTimedOut) {
		return true // sent, and cut at its deadline: the reply was lost
	}
	var myErr *mysql.MySQLError
	return !errors.As(err, &myErr) && !errors.Is(err, sql.ErrTxDone) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// resolveTimeout bounds reading back a COMMIT whose reply was lost. Added
// to the batch's own deadline, already spent, it stays within
// order.request_timeout.
const resolveTimeout = 2 * time.Second

// landed reports whether the transaction that inserted o committed, on a
// fresh context and connection. The read locks the row, so it waits out a
// COMMIT or rollback still under way instead of reading around it.
// With at set, it also reads the position of the server that has it
// there: the COMMIT's own reply, which carried it, was lost.
func (s *MySQL) landed(o service.Order, at *service.Commit) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	var (
		skuID int64
		user  string
		err   error
	)
	if at != nil {
		*at = service.Commit{}
		err = s.sql.QueryRowContext(ctx, "SELECT sku_id, user_id, @@server_id, @@gtid_binlog_pos FROM orders WHERE id = ? LOCK IN SHARE MODE", o.ID).Scan(&skuID, &user, &at.Server, &at.GTIDs)
	} else {
		err = s.sql.QueryRowContext(ctx, "SELECT sku_id, user_id FROM orders WHERE id = ? LOCK IN SHARE MODE", o.ID).Scan(&skuID, &user)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	return skuID == o.SKUID && user == o.UserID, nil
}

// firstOrder is the first order the writers inserted.
func firstOrder(ws []*member) service.Order {
	a := &ws[0].alloc
	return a.Outcomes[a.New[0]].Placed.Order
}
