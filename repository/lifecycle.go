package repository

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/mysqlerr"
	"github.com/seckill/seckill/service"
)

var (
	_ service.LifecycleStore = (*MySQL)(nil)
	_ service.LifecycleStore = (*SQLite)(nil)
)

// expiryFence names the sweeper's row in leader_fences (migration 00003).
const expiryFence = "order-expiry"

// PayOrder marks a pending order paid if not yet due, in one conditional
// UPDATE: a concurrent expiry or cancellation either precedes it (no row
// matches) or finds it paid. With events, the UPDATE and its event are
// one transaction.
func (s *gormStore) PayOrder(ctx context.Context, id int64, now time.Time) (service.Settlement, error) {
	pay := func(tx *gorm.DB) (int64, error) {
		r := tx.Model(&orderRow{}).
			Where("id = ? AND status = ? AND expires_at > ?", id, service.OrderPending, now).
			Updates(map[string]any{"status": service.OrderPaid, "settled_at": now})
		if r.Error != nil || r.RowsAffected != 1 {
			return r.RowsAffected, r.Error
		}
		return 1, s.recordEvents(tx, service.EventPaid, []int64{id}, now)
	}
	var (
		paid int64
		err  error
	)
	db := s.db.WithContext(ctx)
	if s.events {
		err = db.Transaction(func(tx *gorm.DB) (err error) {
			paid, err = pay(tx)
			return err
		})
	} else {
		paid, err = pay(db)
	}
	if err != nil {
		return service.Settlement{}, translate(err, service.ErrNotFound)
	}
	o, err := s.Order(ctx, id)
	if err != nil {
		return service.Settlement{}, err
	}
	switch {
	case paid == 1:
		return service.Settlement{Order: o, Changed: true}, nil
	case o.Status == service.OrderPaid:
		return service.Settlement{Order: o}, nil
	case o.Status == service.OrderPending:
		// Due but not swept yet: expired all the same; the sweeper returns
		// its units.
		return service.Settlement{}, service.ErrOrderExpired
	}
	return service.Settlement{}, service.ErrOfStatus(o.Status)
}

// CancelOrder cancels buyer's pending or waiting order in one
// transaction. A pending one's status goes first (WHERE status =
// 'pending'), so a second cancel, an expiry or a payment returns nothing;
// its units return, to the SKU's waiters first. A waiting one leaves the
// line under its SKU's row lock (leave). An order that changed since it
// was read is service.ErrConflict: the caller tries again.
func (s *gormStore) CancelOrder(ctx context.Context, id int64, buyer string, now time.Time) (service.Settlement, error) {
	var st service.Settlement
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row orderRow
		if err := tx.Take(&row, id).Error; err != nil {
			return err
		}
		if buyer != "" && row.UserID != buyer {
			return gorm.ErrRecordNotFound // someone else's: as if missing
		}
		switch service.OrderStatus(row.Status) {
		case service.OrderCancelled:
			st.Order = row.domain()
			return nil
		case service.OrderWaiting:
			return s.cancelWaiting(tx, row, now, &st)
		case service.OrderPending:
		default:
			return service.ErrOfStatus(service.OrderStatus(row.Status))
		}
		r := tx.Model(&orderRow{}).Where("id = ? AND status = ?", id, service.OrderPending).
			Updates(map[string]any{"status": service.OrderCancelled, "settled_at": now})
		if r.Error != nil {
			return r.Error
		}
		if r.RowsAffected != 1 {
			return service.ErrConflict // paid, expired or cancelled since the read
		}
		if err := s.recordEvents(tx, service.EventCancelled, []int64{id}, now); err != nil {
			return err
		}
		row.Status, row.SettledAt = string(service.OrderCancelled), &now
		st.Order = row.domain()
		skus, given, err := s.returnUnits(tx, []orderRow{row}, now)
		if err != nil {
			return err
		}
		st.Changed, st.Returned, st.Allotted = true, &skus[0], given
		return nil
	})
	if err != nil {
		return service.Settlement{}, translateSettle(err)
	}
	return st, nil
}

// cancelWaiting cancels row, a waiting order, under its SKU's row lock:
// it leaves the line, no unit moves. One given its units since it was
// read is service.ErrConflict: cancelled again, it is pending.
func (s *gormStore) cancelWaiting(tx *gorm.DB, row orderRow, now time.Time, st *service.Settlement) error {
	if err := lockSKUs(tx, []int64{row.SKUID}); err != nil {
		return err
	}
	left, err := leave(tx, []orderRow{row}, service.OrderCancelled, now, nil)
	if err != nil {
		return err
	}
	if len(left) != 1 {
		return service.ErrConflict
	}
	if err := s.recordEvents(tx, service.EventCancelled, []int64{row.ID}, now); err != nil {
		return err
	}
	st.Order, st.Changed = left[0].domain(), true
	return nil
}

// ExpireDue expires up to run.Limit due pending orders, and lapses as
// many waiting orders whose sale ended, in one transaction. It finds them
// with a read that locks nothing, so a paused sweeper holds no row;
// advances the leader fence, refused when a newer lease wrote; then
// expires each order still pending and due and returns its units, to the
// waiting orders first; then locks the SKUs' rows and lapses each order
// still waiting and due.
func (s *gormStore) ExpireDue(ctx context.Context, run service.ExpiryRun) (service.Expiry, error) {
	var ex service.Expiry
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var found []orderRow
		if err := tx.Where("status IN ? AND expires_at <= ?", []service.OrderStatus{service.OrderPending, service.OrderWaiting}, run.Now).
			Order("expires_at, id").Limit(run.Limit).Find(&found).Error; err != nil {
			return err
		}
		if len(found) == 0 {
			return nil
		}
		if err := advanceFence(tx, expiryFence, run.Fence); err != nil {
			return err
		}
		var due, lapsing []orderRow
		for _, o := range found {
			if o.Status == string(service.OrderWaiting) {
				lapsing = append(lapsing, o)
			} else {
				due = append(due, o)
			}
		}
		slices.SortFunc(due, func(a, b orderRow) int { return cmp.Compare(a.ID, b.ID) }) // one lock order
		var expired []orderRow
		for _, o := range due {
			r := tx.Model(&orderRow{}).
				Where("id = ? AND status = ? AND expires_at <= ?", o.ID, service.OrderPending, run.Now).
				Updates(map[string]any{"status": service.OrderExpired, "settled_at": run.Now})
			if r.Error != nil {
				return r.Error
			}
			if r.RowsAffected == 1 {
				expired = append(expired, o)
			}
		}
		if err := s.recordEvents(tx, service.EventExpired, rowIDs(expired), run.Now); err != nil {
			return err
		}
		// Every SKU row this sweep writes, locked in id order before any
		// of them: returning units and lapsing may touch SKUs in any order.
		ids := make([]int64, 0, len(expired)+len(lapsing))
		for _, o := range append(expired, lapsing...) {
			ids = append(ids, o.SKUID)
		}
		if len(ids) == 0 {
			return nil
		}
		if err := lockSKUs(tx, ids); err != nil {
			return err
		}
		if len(expired) > 0 {
			skus, given, err := s.returnUnits(tx, expired, run.Now)
			if err != nil {
				return err
			}
			ex = service.Expiry{Orders: len(expired), SKUs: skus, Allotted: given}
			for _, o := range expired {
				ex.Changed = append(ex.Changed, o.ID)
				ex.Units += o.Quantity
				if ex.Oldest.IsZero() || o.ExpiresAt.Before(ex.Oldest) {
					ex.Oldest = *o.ExpiresAt
				}
			}
		}
		return s.lapse(tx, lapsing, run.Now, &ex)
	})
	if err != nil {
		return service.Expiry{}, translateSettle(err)
	}
	return ex, nil
}

// lapse ends the waiting orders of lapsing whose sale ended by now and
// that still wait; the caller (ExpireDue) has locked their SKUs' rows.
func (s *gormStore) lapse(tx *gorm.DB, lapsing []orderRow, now time.Time, ex *service.Expiry) error {
	if len(lapsing) == 0 {
		return nil
	}
	left, err := leave(tx, lapsing, service.OrderLapsed, now, &now)
	if err != nil {
		return err
	}
	if err := s.recordEvents(tx, service.EventLapsed, rowIDs(left), now); err != nil {
		return err
	}
	ex.Lapsed = len(left)
	for _, o := range left {
		ex.Changed = append(ex.Changed, o.ID)
	}
	if ex.Oldest.IsZero() && len(left) > 0 {
		ex.Oldest = *left[0].ExpiresAt
	}
	return nil
}

// rowIDs returns the ids of rows.
func rowIDs(rows []orderRow) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// advanceFence records fence as the newest that wrote under name, or
// returns service.ErrStaleFence when a newer fence of the same backend
// did (fenceGuard). Fence 0, from a backend without fencing, is not
// recorded.
func advanceFence(tx *gorm.DB, name string, fence int64) error {
	if fence <= 0 {
		return nil
	}
	r := tx.Exec("UPDATE leader_fences SET fence = ?, writes = writes + 1 WHERE name = ? AND "+fenceGuard,
		fence, name, fence, service.FenceCeiling(fence))
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected != 1 {
		return fmt.Errorf("%w: leader %s has a newer fence than %d", service.ErrStaleFence, name, fence)
	}
	return nil
}

// returnUnits gives the units of orders that just left pending back to
// their SKUs and buyers' quotas, locking rows in id order, then to the
// SKUs' waiting orders (allot), and returns the SKUs after and the orders
// given units. The version bump makes a batch that read the old row
// re-read.
func (s *gormStore) returnUnits(tx *gorm.DB, orders []orderRow, now time.Time) ([]service.SKU, []service.Order, error) {
	type holding struct {
		sku  int64
		user string
	}
	units := map[int64]int64{}
	held := map[holding]int64{}
	for _, o := range orders {
		units[o.SKUID] += o.Quantity
		held[holding{o.SKUID, o.UserID}] += o.Quantity
	}
	ids := make([]int64, 0, len(units))
	for id := range units {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := tx.Model(&skuRow{}).Where("id = ? AND sold >= ?", id, units[id]).Updates(map[string]any{
			"stock":      gorm.Expr("stock + ?", units[id]),
			"sold":       gorm.Expr("sold - ?", units[id]),
			"version":    gorm.Expr("version + 1"),
			"updated_at": now,
		})
		if r.Error != nil {
			return nil, nil, r.Error
		}
		if r.RowsAffected != 1 {
			return nil, nil, fmt.Errorf("repository: sku %d sold fewer units than its orders return (%d)", id, units[id])
		}
	}
	keys := make([]holding, 0, len(held))
	for h := range held {
		keys = append(keys, h)
	}
	slices.SortFunc(keys, func(a, b holding) int {
		return cmp.Or(cmp.Compare(a.sku, b.sku), cmp.Compare(a.user, b.user))
	})
	for _, h := range keys {
		if err := releaseHolding(tx, h.sku, h.user, held[h], false); err != nil {
			return nil, nil, err
		}
	}
	return s.allot(tx, ids, now)
}

// releaseHolding takes n units off a user's holding of a SKU: the row
// goes when nothing is left (the CHECK wants quantity >= 1). For a
// waiting order's units (waiting), the holding must carry the waiting
// mark, which goes with them.
func releaseHolding(tx *gorm.DB, skuID int64, user string, n int64, waiting bool) error {
	mark := ""
	set := map[string]any{"quantity": gorm.Expr("quantity - ?", n)}
	if waiting {
		mark = " AND waiting = 1"
		set["waiting"] = 0
	}
	r := tx.Where("sku_id = ? AND user_id = ? AND quantity = ?"+mark, skuID, user, n).Delete(&purchaseRow{})
	if r.Error != nil || r.RowsAffected == 1 {
		return r.Error
	}
	r = tx.Model(&purchaseRow{}).Where("sku_id = ? AND user_id = ? AND quantity > ?"+mark, skuID, user, n).Updates(set)
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected != 1 {
		return fmt.Errorf("repository: user %q holds fewer units of sku %d than their order returns (%d)", user, skuID, n)
	}
	return nil
}

// OrderUnits sums the units of a SKU's pending and paid orders, on the
// orders_sku_id index: an admin's read, not the order path's.
func (s *gormStore) OrderUnits(ctx context.Context, skuID int64) (pending, paid int64, err error) {
	var rows []struct {
		Status string
		Units  int64
	}
	if err := s.db.WithContext(ctx).Raw("SELECT status, COALESCE(SUM(quantity), 0) AS units FROM orders WHERE sku_id = ? AND status IN (?, ?) GROUP BY status",
		skuID, service.OrderPending, service.OrderPaid).Scan(&rows).Error; err != nil {
		return 0, 0, translate(err, service.ErrSKUNotFound)
	}
	for _, r := range rows {
		if r.Status == string(service.OrderPending) {
			pending = r.Units
		} else {
			paid = r.Units
		}
	}
	return pending, paid, nil
}

// OrderUnitsOf is OrderUnits for several SKUs in one statement, on the
// same index: the admin list's view.
func (s *gormStore) OrderUnitsOf(ctx context.Context, skuIDs []int64) (map[int64]service.Units, error) {
	var rows []struct {
		SKUID  int64 `gorm:"column:sku_id"`
		Status string
		Units  int64
	}
	if err := s.db.WithContext(ctx).Raw("SELECT sku_id, status, COALESCE(SUM(quantity), 0) AS units FROM orders WHERE sku_id IN ? AND status IN (?, ?) GROUP BY sku_id, status",
		skuIDs, service.OrderPending, service.OrderPaid).Scan(&rows).Error; err != nil {
		return nil, translate(err, service.ErrSKUNotFound)
	}
	out := make(map[int64]service.Units, len(skuIDs))
	for _, r := range rows {
		u := out[r.SKUID]
		if r.Status == string(service.OrderPending) {
			u.Pending = r.Units
		} else {
			u.Paid = r.Units
		}
		out[r.SKUID] = u
	}
	return out, nil
}

// translateSettle is translate for the lifecycle: domain answers pass
// through; a deadlock or lock-wait timeout is service.ErrConflict, which
// the caller may retry, nothing written.
func translateSettle(err error) error {
	for _, known := range []error{service.ErrOrderPaid, service.ErrOrderCancelled, service.ErrOrderExpired, service.ErrOrderWaiting, service.ErrOrderLapsed} {
		if errors.Is(err, known) {
			return err
		}
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == mysqlerr.LockWaitTimeout {
		return fmt.Errorf("%w: %w", service.ErrConflict, err)
	}
	return translate(err, service.ErrNotFound)
}
