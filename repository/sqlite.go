package repository

import (
	"context"
	"database/sql"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/service"
)

var (
	_ service.OrderReader    = (*SQLite)(nil)
	_ service.SKUReader      = (*SQLite)(nil)
	_ service.CatalogStore   = (*SQLite)(nil)
	_ service.SKUOrders      = (*SQLite)(nil)
	_ service.LifecycleStore = (*SQLite)(nil)
	_ service.OrderStates    = (*SQLite)(nil)
)

// SQLite is the store of the quick start only (no mysql.dsn): one
// process, one connection, one transaction at a time
// (database.OpenSQLite). Its writes are guarded as MySQL's are; it has
// neither MySQL's speed nor its replicas, and is not for production.
type SQLite struct {
	gormStore
}

// NewSQLite returns the store over db, a SQLite database with the schema
// of migrations/sqlite. It panics given WithReplicas.
func NewSQLite(db *gorm.DB, opts ...Option) *SQLite {
	o := optionsOf(opts)
	if o.replicas != nil {
		panic("repository: SQLite has no replicas to confirm with")
	}
	return &SQLite{gormStore{db: db, hold: o.hold, events: o.events}}
}

// CommitBatch commits b in one transaction: reads, service.Allocate, then
// conditional writes. It returns service.ErrConflict when a guard fails
// and service.ErrStaleFence when a newer fence wrote. When the database
// refuses one request's row, the requests commit one by one (commitEach)
// so the others do not fail.
func (s *SQLite) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	res, err := s.commitOnce(ctx, b)
	if err != nil && len(b.Requests) > 1 && refusesARow(err) {
		return commitEach(ctx, s, b)
	}
	return res, err
}

// CommitRound commits the batches one after another, each in its own
// transaction: SQLite runs one transaction at a time, in-process.
func (s *SQLite) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, s.CommitBatch)
}

// commitOnce commits b through GORM a statement at a time: in-process,
// round trips are free and a failed COMMIT did not commit. It decides as
// MySQL's commit does (member.decide).
func (s *SQLite) commitOnce(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	m := &member{b: b}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Take(&m.sku, b.SKUID).Error; err != nil {
			return err
		}
		if service.FenceStale(m.sku.Fence, b.Fence) {
			return staleFence(b, m.sku)
		}
		existing, err := s.ordersByKey(tx, b.Requests)
		if err != nil {
			return err
		}
		if m.held, err = s.holdings(tx, b.SKUID, b.Requests); err != nil {
			return err
		}
		m.decide(existing)
		if !m.alloc.Writes() {
			return nil
		}
		if err := s.decrement(tx, b, m.sku, &m.alloc); err != nil {
			return err
		}
		if err := s.insertOrders(tx, m); err != nil {
			return err
		}
		if err := s.addHoldings(tx, m); err != nil {
			return err
		}
		return placeWaiters([]*member{m}, func(q string, args ...any) (*sql.Rows, error) { return tx.Raw(q, args...).Rows() })
	})
	if err != nil {
		return service.BatchResult{}, translateBatch(err, b)
	}
	resolve([]*member{m})
	return m.res, nil
}

func (s *SQLite) decrement(tx *gorm.DB, b service.Batch, sku skuRow, a *service.Allocation) error {
	set := map[string]any{
		"stock":      gorm.Expr("stock - ?", a.Units),
		"sold":       gorm.Expr("sold + ?", a.Units),
		"version":    gorm.Expr("version + 1"),
		"updated_at": b.Now,
	}
	if a.Waiters > 0 {
		set["waiters"] = gorm.Expr("waiters + ?", a.Waiters)
	}
	q := tx.Model(&skuRow{}).Where("id = ? AND stock >= ? AND version = ?", sku.ID, a.Units, sku.Version)
	if b.Fence > 0 {
		q = q.Where(fenceGuard, b.Fence, service.FenceCeiling(b.Fence))
		set["fence"] = b.Fence
	}
	r := q.Updates(set)
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected != 1 {
		return service.ErrConflict
	}
	return nil
}

func (s *SQLite) insertOrders(tx *gorm.DB, m *member) error {
	a := &m.alloc
	rows := make([]orderRow, len(a.New))
	for k, i := range a.New {
		o := a.Outcomes[i].Placed.Order
		rows[k] = orderRow{SKUID: o.SKUID, UserID: o.UserID, Quantity: o.Quantity, CreatedAt: o.CreatedAt,
			Status: string(o.Status), ExpiresAt: o.ExpiresAt, Arrival: arrivalOf(o), JoinedVersion: joinedVersion(o, m.sku)}
		if o.IdempotencyKey != "" {
			key := o.IdempotencyKey
			rows[k].IdempotencyKey = &key
		}
	}
	if err := tx.Create(&rows).Error; err != nil {
		return err
	}
	ids := make([]int64, len(a.New))
	for k, i := range a.New {
		a.Outcomes[i].Placed.Order.ID = rows[k].ID
		ids[k] = rows[k].ID
	}
	return s.recordEvents(tx, service.EventCreated, ids, m.b.Now)
}

// addHoldings adds each buyer's new units to user_purchases as deltas,
// not totals, so the CHECKs see the true holding whatever was read, and
// marks those who now wait.
func (s *SQLite) addHoldings(tx *gorm.DB, m *member) error {
	a := &m.alloc
	waits := m.newWaiters()
	rows := make([]purchaseRow, 0, len(a.Bought))
	for _, i := range a.New { // arrival order: deterministic lock order
		u := a.Outcomes[i].Placed.Order.UserID
		if n, ok := a.Bought[u]; ok {
			rows = append(rows, purchaseRow{SKUID: m.sku.ID, UserID: u, Quantity: n - m.held[u].Units,
				PerUserLimit: m.sku.PerUserLimit, Waiting: waitingFlag(waits[u])})
			delete(a.Bought, u)
		}
	}
	return tx.Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "sku_id"}, {Name: "user_id"}},
		DoUpdates: clause.Assignments(map[string]any{
			"quantity": gorm.Expr("user_purchases.quantity + excluded.quantity"),
			"waiting":  gorm.Expr("user_purchases.waiting + excluded.waiting"),
		}),
	}).Create(&rows).Error
}

func (s *SQLite) ordersByKey(tx *gorm.DB, reqs []service.OrderRequest) (map[service.BuyerKey]service.Order, error) {
	keys := idempotencyKeys(reqs)
	if len(keys) == 0 {
		return nil, nil
	}
	pairs := make([][]any, len(keys))
	for i, k := range keys {
		pairs[i] = []any{k.UserID, k.Key}
	}
	var rows []orderRow
	if err := tx.Where("(user_id, idempotency_key) IN ?", pairs).Find(&rows).Error; err != nil {
		return nil, err
	}
	m := make(map[service.BuyerKey]service.Order, len(rows))
	for _, r := range rows {
		m[service.BuyerKey{UserID: r.UserID, Key: *r.IdempotencyKey}] = r.domain()
	}
	return m, nil
}

func (s *SQLite) holdings(tx *gorm.DB, skuID int64, reqs []service.OrderRequest) (map[string]service.Holding, error) {
	var rows []purchaseRow
	if err := tx.Where("sku_id = ? AND user_id IN ?", skuID, distinctUsers(reqs)).Find(&rows).Error; err != nil {
		return nil, err
	}
	m := make(map[string]service.Holding, len(rows))
	for _, r := range rows {
		m[r.UserID] = service.Holding{Units: r.Quantity, Waiting: r.Waiting > 0}
	}
	return m, nil
}

// skuAtCommit is SKU: SQLite has no replicas to confirm with.
func (s *SQLite) skuAtCommit(ctx context.Context, id int64) (service.SKU, service.Commit, error) {
	sku, err := s.SKU(ctx, id)
	return sku, service.Commit{}, err
}
