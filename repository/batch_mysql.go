package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/mysqlerr"
	"github.com/seckill/seckill/service"
)

// commitMySQL commits one batch per SKU in one transaction of three round
// trips (reads, writes, COMMIT): round trips, not rows, set a small
// batch's cost. A round of known rows tries two first (commitKnown).
//
// A nil error means each member holds its answer, maybe its own error
// (service.ErrOutcomeUnknown: a COMMIT that could not be read back). Any
// other error means nothing was committed.
func (s *Stock) commitMySQL(ctx context.Context, ms []*member, wait lockWait) error {
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
func (s *Stock) commitKnown(ctx context.Context, ms []*member, wait lockWait) error {
	tx, err := s.newConnTx(ctx, wait)
	if err != nil {
		return err
	}
	defer tx.end() // rolls back unless committed, then returns the connection
	w := writes{onServer: s.replicas != nil}
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
func (s *Stock) commitRead(ctx context.Context, ms []*member, wait lockWait) error {
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
		if m.alloc.Units > 0 {
			writers = append(writers, m)
		}
	}
	if len(writers) > 0 {
		var w writes
		w.add(writers)
		ans, err := w.send(ctx, tx, tx.exec)
		if err != nil {
			return err
		}
		if ans.updated != int64(len(writers)) {
			return service.ErrConflict
		}
		ans.numberOrders(writers)
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
func (s *Stock) newConnTx(ctx context.Context, wait lockWait) (*connTx, error) {
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
func (s *Stock) commitWrites(ctx context.Context, tx *connTx, writers []*member) error {
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
		m.sku, m.held, m.err = rowOf(*m.b.Known), map[string]int64{}, nil
		if service.FenceStale(m.sku.Fence, m.b.Fence) {
			return false // the reads tell which fence is newer
		}
		m.decide(nil)
		if m.alloc.Units == 0 || refusesAKey(m) {
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

func staleFence(b service.Batch, sku skuRow) error {
	return &service.StaleFenceError{SKUID: sku.ID, Stored: sku.Fence, Fence: b.Fence}
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
func (s *Stock) landed(o service.Order, at *service.Commit) (bool, error) {
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

func (s *Stock) readMembers(ctx context.Context, tx *connTx, ms []*member) (existing map[service.BuyerKey]service.Order, err error) {
	var (
		q    strings.Builder
		args []any
	)
	q.WriteString(tx.beginning())
	q.WriteString("SELECT id, name, total_stock, stock, sold, version, fence, per_user_limit, starts_at, ends_at, created_at, updated_at FROM skus WHERE id IN (")
	for i, m := range ms {
		q.WriteString(placeholder(i))
		args = append(args, m.b.SKUID)
	}
	q.WriteString(")")

	q.WriteString("; SELECT sku_id, user_id, quantity FROM user_purchases WHERE (sku_id, user_id) IN (")
	n := 0
	for _, m := range ms {
		for _, u := range distinctUsers(m.b.Requests) {
			if n > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?)")
			args = append(args, m.b.SKUID, u)
			n++
		}
	}
	q.WriteString(")")

	var keys []service.BuyerKey
	for _, m := range ms {
		keys = append(keys, idempotencyKeys(m.b.Requests)...)
	}
	if len(keys) > 0 {
		q.WriteString("; SELECT id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at FROM orders WHERE (user_id, idempotency_key) IN (")
		for i, k := range keys {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?)")
			args = append(args, k.UserID, k.Key)
		}
		q.WriteString(")")
	}

	rows, err := tx.begin(ctx, q.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()

	bySKU := make(map[int64]*member, len(ms))
	for _, m := range ms {
		m.err = service.ErrSKUNotFound // until its row is read
		m.held = map[string]int64{}
		m.res = service.BatchResult{} // nothing of a decision on the known row stays
		bySKU[m.b.SKUID] = m
	}
	for rows.Next() {
		var r skuRow
		if err := rows.Scan(&r.ID, &r.Name, &r.TotalStock, &r.Stock, &r.Sold, &r.Version, &r.Fence,
			&r.PerUserLimit, &r.StartsAt, &r.EndsAt, &r.CreatedAt, &r.UpdatedAt); err != nil {
			return nil, err
		}
		if m := bySKU[r.ID]; m != nil {
			m.sku, m.err = r, nil
		}
	}
	if !rows.NextResultSet() {
		return nil, resultSetMissing(rows, "holdings")
	}
	for rows.Next() {
		var sku, qty int64
		var u string
		if err := rows.Scan(&sku, &u, &qty); err != nil {
			return nil, err
		}
		if m := bySKU[sku]; m != nil {
			m.held[u] = qty
		}
	}
	if len(keys) > 0 {
		if !rows.NextResultSet() {
			return nil, resultSetMissing(rows, "orders by key")
		}
		existing = make(map[service.BuyerKey]service.Order, len(keys))
		for rows.Next() {
			var r orderRow
			if err := rows.Scan(&r.ID, &r.SKUID, &r.UserID, &r.Quantity, &r.IdempotencyKey, &r.CreatedAt, &r.Status, &r.ExpiresAt, &r.SettledAt); err != nil {
				return nil, err
			}
			existing[service.BuyerKey{UserID: r.UserID, Key: *r.IdempotencyKey}] = r.domain()
		}
	}
	return existing, rows.Err()
}

// writes is one multi-statement of a round's writes: a conditional UPDATE
// of every SKU, the orders' INSERT and the holdings' upsert.
type writes struct {
	q       strings.Builder
	args    []any
	orders  int // rows of the orders' INSERT
	holders int // rows of the holdings' upsert
	// onServer guards each known row's UPDATE with the server that
	// committed it (Batch.KnownOn): after a failover the promoted
	// server's row may have the same version and other contents.
	onServer bool
}

// add appends the writes of the decided members ws.
func (w *writes) add(ws []*member) {
	w.updateSKUs(ws)
	w.insertOrders(ws)
	w.upsertHoldings(ws)
}

// updateSKUs decrements every SKU in one conditional UPDATE, each SKU's
// guard (stock, version, fence) one disjunct of the WHERE, so rows
// affected tell whether every guard held.
func (w *writes) updateSKUs(ws []*member) {
	caseOf := func(col string, val func(*member) any) {
		w.q.WriteString(col + " CASE id")
		for _, m := range ws {
			w.q.WriteString(" WHEN ? THEN ?")
			w.args = append(w.args, m.sku.ID, val(m))
		}
		w.q.WriteString(" END")
	}
	w.q.WriteString("UPDATE skus SET ")
	caseOf("stock = stock -", func(m *member) any { return m.alloc.Units })
	w.q.WriteString(", ")
	caseOf("sold = sold +", func(m *member) any { return m.alloc.Units })
	w.q.WriteString(", version = version + 1, updated_at = ?")
	w.args = append(w.args, ws[0].b.Now)
	fenced := false
	for _, m := range ws {
		fenced = fenced || m.b.Fence > 0
	}
	if fenced {
		w.q.WriteString(", fence = CASE id")
		for _, m := range ws {
			if m.b.Fence > 0 {
				w.q.WriteString(" WHEN ? THEN ?")
				w.args = append(w.args, m.sku.ID, m.b.Fence)
			}
		}
		w.q.WriteString(" ELSE fence END")
	}
	w.q.WriteString(" WHERE ")
	for i, m := range ws {
		if i > 0 {
			w.q.WriteString(" OR ")
		}
		w.q.WriteString("(id = ? AND stock >= ? AND version = ?")
		w.args = append(w.args, m.sku.ID, m.alloc.Units, m.sku.Version)
		if m.b.Fence > 0 {
			w.q.WriteString(" AND " + fenceGuard)
			w.args = append(w.args, m.b.Fence, service.FenceCeiling(m.b.Fence))
		}
		if w.onServer {
			w.q.WriteString(" AND @@server_id = ?")
			w.args = append(w.args, m.b.KnownOn)
		}
		w.q.WriteString(")")
	}
}

// insertOrders inserts the members' new orders in one multi-row INSERT.
func (w *writes) insertOrders(ws []*member) {
	w.q.WriteString("; INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at) VALUES ")
	for _, m := range ws {
		for _, i := range m.alloc.New {
			o := m.alloc.Outcomes[i].Placed.Order
			if w.orders > 0 {
				w.q.WriteString(", ")
			}
			w.orders++
			w.q.WriteString("(?, ?, ?, ?, ?, ?, ?)")
			var key any
			if o.IdempotencyKey != "" {
				key = o.IdempotencyKey
			}
			w.args = append(w.args, o.SKUID, o.UserID, o.Quantity, key, o.CreatedAt, string(o.Status), o.ExpiresAt)
		}
	}
}

// upsertHoldings adds each new buyer's units in arrival order, a
// deterministic lock order. Deltas, not totals: the CHECK sees the true
// holding whatever was read.
func (w *writes) upsertHoldings(ws []*member) {
	w.q.WriteString("; INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit) VALUES ")
	for _, m := range ws {
		for _, i := range m.alloc.New {
			u := m.alloc.Outcomes[i].Placed.Order.UserID
			after, ok := m.alloc.Bought[u]
			if !ok {
				continue
			}
			delete(m.alloc.Bought, u)
			if w.holders > 0 {
				w.q.WriteString(", ")
			}
			w.holders++
			w.q.WriteString("(?, ?, ?, ?)")
			w.args = append(w.args, m.sku.ID, u, after-m.held[u], m.sku.PerUserLimit)
		}
	}
	w.q.WriteString(" ON DUPLICATE KEY UPDATE quantity = quantity + VALUES(quantity)")
}

// writeAnswers is what the server answered to a round's writes.
type writeAnswers struct {
	updated  int64 // SKU rows the UPDATE changed
	holdings int64 // rows affected by the holdings' upsert
	firstID  int64 // the id of the first order inserted
	step     int64 // auto_increment_increment: the step between order ids
}

// send runs w with exec (tx.beginExec when w begins the transaction) and
// returns each statement's answer, sparing SELECTs of rows affected and
// ids.
func (w *writes) send(ctx context.Context, tx *connTx, exec func(context.Context, string, ...any) (mysql.Result, error)) (writeAnswers, error) {
	ans := writeAnswers{step: 1}
	if w.orders > 1 {
		var err error
		if ans.step, err = tx.autoIncrementStep(ctx); err != nil {
			return ans, err
		}
	}
	res, err := exec(ctx, w.q.String(), w.args...)
	if err != nil {
		return ans, err
	}
	// The last three answers are the UPDATE's, the orders' and the holdings'.
	affected, ids := res.AllRowsAffected(), res.AllLastInsertIds()
	if len(affected) < 3 || len(ids) != len(affected) {
		return ans, fmt.Errorf("repository: %d answers to the writes (does the DSN allow multiStatements?)", len(affected))
	}
	last := len(affected) - 1
	ans.updated, ans.firstID, ans.holdings = affected[last-2], ids[last-1], affected[last]
	return ans, nil
}

// numberOrders gives the new orders of ws their ids: InnoDB gives one
// multi-row INSERT consecutive ids, auto_increment_increment apart, as
// GORM also assumes.
func (ans writeAnswers) numberOrders(ws []*member) {
	id := ans.firstID
	for _, m := range ws {
		for _, i := range m.alloc.New {
			m.alloc.Outcomes[i].Placed.Order.ID = id
			id += ans.step
		}
	}
}

// knownChanged wraps as errKnownChanged a refusal showing a known row
// changed: a used idempotency key (duplicate entry) or a holding over the
// limit (CHECK, or past its column's range). Other errors stand.
func knownChanged(err error) error {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case mysqlerr.DuplicateEntry, mysqlerr.ConstraintFailed, mysqlerr.CheckViolated, mysqlerr.OutOfRange:
			return fmt.Errorf("%w: %w", errKnownChanged, err)
		}
	}
	return err
}

func resultSetMissing(rows *sql.Rows, what string) error {
	if err := rows.Err(); err != nil {
		return err
	}
	return fmt.Errorf("repository: %s result set missing (does the DSN allow multiStatements?)", what)
}

func placeholder(i int) string {
	if i == 0 {
		return "?"
	}
	return ", ?"
}

func distinctUsers(reqs []service.OrderRequest) []string {
	seen := make(map[string]bool, len(reqs))
	users := make([]string, 0, len(reqs))
	for _, r := range reqs {
		if !seen[r.UserID] {
			seen[r.UserID] = true
			users = append(users, r.UserID)
		}
	}
	return users
}

func idempotencyKeys(reqs []service.OrderRequest) []service.BuyerKey {
	var keys []service.BuyerKey
	for _, r := range reqs {
		if r.IdempotencyKey != "" {
			keys = append(keys, service.KeyOf(r))
		}
	}
	return keys
}
