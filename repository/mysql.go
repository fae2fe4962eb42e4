package repository

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/service"
)

var (
	_ service.OrderReader    = (*MySQL)(nil)
	_ service.SKUReader      = (*MySQL)(nil)
	_ service.CatalogStore   = (*MySQL)(nil)
	_ service.SKUOrders      = (*MySQL)(nil)
	_ service.LifecycleStore = (*MySQL)(nil)
	_ service.OrderStates    = (*MySQL)(nil)
)

// MySQL is the store of the service's MySQL or MariaDB database. It
// commits batches in multi-statement round trips on a pooled connection
// of its own (connTx), beside GORM for everything else (gormStore).
type MySQL struct {
	gormStore
	sql *sql.DB // the batch commit's multi-statement round trips
	// sessions: what each connection's session holds of ours.
	sessions sessions
	// replicas, when set, confirms commits and reads: every COMMIT then
	// reads its position, and replays and SKU reads are confirmed
	// before they are returned (WithReplicas).
	replicas Confirmer
}

// Confirmer confirms that enough replicas have a commit: Replicas does.
// Confirm returns nil once they do, else an error wrapping
// service.ErrNotReplicated.
type Confirmer interface {
	Confirm(ctx context.Context, c service.Commit) error
}

// Option configures a store.
type Option func(*options)

type options struct {
	replicas Confirmer
	hold     time.Duration
	events   bool
}

// WithReplicas makes a MySQL store track where each transaction
// committed (BatchResult.Commit) and confirm the orders and SKUs it reads
// with r. NewSQLite panics with it: SQLite has no replicas.
func WithReplicas(r Confirmer) Option {
	return func(o *options) { o.replicas = r }
}

// WithPaymentTimeout is how long an order allotted to a waiter stays
// pending (order.payment_timeout); without it, or 0, it is paid at once.
func WithPaymentTimeout(d time.Duration) Option {
	return func(o *options) { o.hold = d }
}

func optionsOf(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// NewMySQL returns the store over db, which must have the schema of
// migrations/mysql and allow multiStatements (database.OpenMySQL's
// does): a batch commits in three round trips. It panics when db is not
// over a *sql.DB, which database.OpenMySQL's always is.
func NewMySQL(db *gorm.DB, opts ...Option) *MySQL {
	sqlDB, err := db.DB()
	if err != nil {
		panic(fmt.Sprintf("repository: NewMySQL needs a pool: %v", err))
	}
	o := optionsOf(opts)
	s := &MySQL{gormStore: gormStore{db: db, hold: o.hold, events: o.events}, sql: sqlDB, replicas: o.replicas}
	s.sessions.db = sqlDB
	return s
}

// CommitBatch commits b in one transaction: reads, service.Allocate, then
// conditional writes. It returns service.ErrConflict when a guard fails,
// service.ErrStaleFence when a newer fence wrote, and
// service.ErrOutcomeUnknown when a COMMIT cannot be read back. When the
// database refuses one request's row, the requests commit one by one
// (commitEach) so the others do not fail.
func (s *MySQL) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	res, err := s.commitOnce(ctx, b)
	if err != nil && len(b.Requests) > 1 && refusesARow(err) {
		return commitEach(ctx, s, b)
	}
	return res, err
}

// commitOnce commits b in one transaction (CommitBatch) whose row-lock
// waits end with ctx.
func (s *MySQL) commitOnce(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	m := &member{b: b}
	if err := s.commitMySQL(ctx, []*member{m}, lockWaitUntil(ctx)); err != nil {
		return service.BatchResult{}, translateBatch(err, b)
	}
	return m.res, m.err
}

// CommitRound commits one batch per SKU in one transaction whose row-lock
// waits are bounded (sharedLockWait): a row held elsewhere fails the
// round in a second instead of stalling the other SKUs' rows. On error
// nothing was committed; service.ErrNoTransaction means none began.
func (s *MySQL) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	out := make([]service.RoundResult, len(bs))
	ms := make([]member, len(bs))
	ptrs := make([]*member, len(bs))
	for i, b := range bs {
		ms[i].b = b
		ptrs[i] = &ms[i]
	}
	if err := s.commitMySQL(ctx, ptrs, sharedLockWait); err != nil {
		return nil, translate(err, service.ErrSKUNotFound)
	}
	for i, m := range ms {
		out[i] = service.RoundResult{BatchResult: m.res, Err: m.err}
	}
	return out, nil
}

// OrderByKey returns the order userID placed under an idempotency key, or
// service.ErrNotFound; with replicas, once they have it (orderByKeyAt).
func (s *MySQL) OrderByKey(ctx context.Context, userID, key string) (service.Order, error) {
	if s.replicas != nil {
		return s.orderByKeyAt(ctx, userID, key)
	}
	return s.gormStore.OrderByKey(ctx, userID, key)
}

// SKU returns one SKU, or service.ErrSKUNotFound; with replicas, once
// they have it (skuAt).
func (s *MySQL) SKU(ctx context.Context, id int64) (service.SKU, error) {
	if s.replicas != nil {
		return s.skuAt(ctx, id)
	}
	return s.gormStore.SKU(ctx, id)
}
