package repository

import (
	"cmp"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/service"
)

// The waitlist's writes (service/waitlist.go). Every transaction that
// touches a SKU's waiting orders locks the SKU's row before them, as the
// batch commit's UPDATE does: a SKU's row, then its orders, then the
// holdings. Whoever holds the row decides, on the line as it is; each
// order's move is also conditional on its status, its rows affected
// checked, so a waiting order is given units, or leaves the line, once.

// linePage bounds the waiters one read of allotSKU locks.
const linePage = 1000

// forUpdate locks what a read returns; SQLite's dialect drops it: one
// writer at a time.
var forUpdate = clause.Locking{Strength: clause.LockingStrengthUpdate}

// allot gives the free stock of each SKU of ids (in id order, rows tx
// has locked) to its waiting orders in arrival order (service.Allot) and
// returns the SKUs as tx leaves them, in the order of ids, and the orders
// given units.
func (s *gormStore) allot(tx *gorm.DB, ids []int64, now time.Time) ([]service.SKU, []service.Order, error) {
	out := make([]service.SKU, 0, len(ids))
	var given []service.Order
	for _, id := range ids {
		var row skuRow
		if err := tx.Take(&row, id).Error; err != nil {
			return nil, nil, err
		}
		sku := row.domain()
		if sku.Waiters > 0 && sku.Stock > 0 && sku.Active(now) {
			g, err := s.allotSKU(tx, &sku, now)
			if err != nil {
				return nil, nil, err
			}
			given = append(given, g...)
		}
		out = append(out, sku)
	}
	return out, given, nil
}

// allotSKU gives sku's free stock to its waiters, reading them in arrival
// order a page at a time, only those that could fit, and leaves sku as
// it wrote it. A waiter passed over does not fit later either: what is
// free only shrinks.
func (s *gormStore) allotSKU(tx *gorm.DB, sku *service.SKU, now time.Time) ([]service.Order, error) {
	var (
		given   []service.Order
		after   *orderRow // the last waiter read
		pageMax = int(min(sku.Stock, linePage))
	)
	for sku.Stock > 0 {
		q := tx.Clauses(forUpdate).Where("sku_id = ? AND status = ? AND quantity <= ?", sku.ID, service.OrderWaiting, sku.Stock)
		if after != nil {
			q = q.Where("(arrival > ? OR (arrival = ? AND id > ?))", *after.Arrival, *after.Arrival, after.ID)
		}
		var rows []orderRow
		if err := q.Order("arrival, id").Limit(pageMax).Find(&rows).Error; err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			break
		}
		line := make([]service.Order, len(rows))
		for i, r := range rows {
			line[i] = r.domain()
		}
		g := service.Allot(*sku, line, now, s.hold)
		if err := s.applyAllotment(tx, sku, g, now); err != nil {
			return nil, err
		}
		given = append(given, g...)
		if len(rows) < pageMax {
			break
		}
		after = &rows[len(rows)-1]
	}
	return given, nil
}

// applyAllotment writes g, orders of sku just given its units: each moves
// from waiting, recording the version the SKU's UPDATE writes
// (allotted_version) with its event, its holding stops waiting, and the
// SKU's row, at the version read, sells the units and counts the waiters
// out.
func (s *gormStore) applyAllotment(tx *gorm.DB, sku *service.SKU, g []service.Order, now time.Time) error {
	if len(g) == 0 {
		return nil
	}
	ids := make([]int64, len(g))
	users := make([]string, len(g))
	var units int64
	for i, o := range g {
		ids[i], users[i] = o.ID, o.UserID
		units += o.Quantity
	}
	r := tx.Model(&orderRow{}).Where("id IN ? AND status = ?", ids, service.OrderWaiting).Updates(map[string]any{
		"status": g[0].Status, "expires_at": g[0].ExpiresAt, "allocated_at": now, "allotted_version": sku.Version + 1,
	})
	if err := affected(r, len(g), "waiting orders given units"); err != nil {
		return err
	}
	if err := s.recordEvents(tx, service.EventAllocated, ids, now); err != nil {
		return err
	}
	r = tx.Model(&purchaseRow{}).Where("sku_id = ? AND user_id IN ? AND waiting = 1", sku.ID, users).Update("waiting", 0)
	if err := affected(r, len(g), "waiting holdings"); err != nil {
		return err
	}
	r = tx.Model(&skuRow{}).Where("id = ? AND version = ? AND stock >= ? AND waiters >= ?", sku.ID, sku.Version, units, len(g)).Updates(map[string]any{
		"stock":      gorm.Expr("stock - ?", units),
		"sold":       gorm.Expr("sold + ?", units),
		"waiters":    gorm.Expr("waiters - ?", len(g)),
		"version":    gorm.Expr("version + 1"),
		"updated_at": now,
	})
	if err := affected(r, 1, "sku rows"); err != nil {
		return err
	}
	sku.Stock -= units
	sku.Sold += units
	sku.Waiters -= int64(len(g))
	sku.Version++
	sku.UpdatedAt = now
	return nil
}

// affected checks that r changed want rows; anything else is a bug of
// the locking above, and rolls the transaction back.
func affected(r *gorm.DB, want int, what string) error {
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected != int64(want) {
		return fmt.Errorf("repository: %d %s changed; want %d", r.RowsAffected, what, want)
	}
	return nil
}

// lockSKUs locks the rows of the SKUs of ids, in id order (sorted here),
// before their waiting orders.
func lockSKUs(tx *gorm.DB, ids []int64) error {
	slices.Sort(ids)
	var rows []skuRow
	return tx.Clauses(forUpdate).Where("id IN ?", slices.Compact(ids)).Order("id").Find(&rows).Error
}

// leave moves orders, waiting orders whose SKU rows tx has locked, to
// status (cancelled or lapsed) at now, each only if it still waits (and
// is due, when due is set), and takes those moved off their lines: the
// SKU's waiters and the buyer's holding. It returns those moved.
func leave(tx *gorm.DB, orders []orderRow, status service.OrderStatus, now time.Time, due *time.Time) ([]orderRow, error) {
	slices.SortFunc(orders, func(a, b orderRow) int { return cmp.Compare(a.ID, b.ID) })
	var left []orderRow
	for _, o := range orders {
		q := tx.Model(&orderRow{}).Where("id = ? AND status = ?", o.ID, service.OrderWaiting)
		if due != nil {
			q = q.Where("expires_at <= ?", *due)
		}
		r := q.Updates(map[string]any{"status": status, "settled_at": now})
		if r.Error != nil {
			return nil, r.Error
		}
		if r.RowsAffected == 1 {
			o.Status, o.SettledAt = string(status), &now
			left = append(left, o)
		}
	}
	bySKU := map[int64]int64{}
	for _, o := range left {
		bySKU[o.SKUID]++
		if err := releaseHolding(tx, o.SKUID, o.UserID, o.Quantity, true); err != nil {
			return nil, err
		}
	}
	for id, n := range bySKU {
		r := tx.Model(&skuRow{}).Where("id = ? AND waiters >= ?", id, n).Updates(map[string]any{
			"waiters":    gorm.Expr("waiters - ?", n),
			"version":    gorm.Expr("version + 1"),
			"updated_at": now,
		})
		if err := affected(r, 1, "sku rows counting waiters out"); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// linePositions asks each of n orders' place in its SKU's line: the
// waiting orders ahead of it by arrival (then id), as the transaction
// that just wrote them sees the line. The SKU's row is locked, so no
// waiter joins or leaves meanwhile. One scan of the SKU's waiters.
func linePositions(n int) string {
	return `SELECT id, pos FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY arrival, id) - 1 AS pos
	FROM orders WHERE sku_id = ? AND status = 'waiting') line WHERE id IN (?` + strings.Repeat(", ?", n-1) + ")"
}

// placeWaiters gives each new waiting order of ms its place in line by
// arrival (linePositions), not by when its batch joined: an earlier
// arrival whose batch commits later stands ahead of those already there.
// query runs a read inside the members' transaction.
func placeWaiters(ms []*member, query func(q string, args ...any) (*sql.Rows, error)) error {
	for _, m := range ms {
		if m.err != nil || m.alloc.Waiters == 0 {
			continue
		}
		at := map[int64]int{} // order id → its request
		for _, i := range m.alloc.New {
			if o := m.alloc.Outcomes[i].Placed.Order; o.Status == service.OrderWaiting {
				at[o.ID] = i
			}
		}
		args := []any{m.sku.ID}
		for _, id := range slices.Sorted(maps.Keys(at)) {
			args = append(args, id)
		}
		rows, err := query(linePositions(len(at)), args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, pos int64
			if err := rows.Scan(&id, &pos); err != nil {
				rows.Close()
				return err
			}
			m.alloc.Outcomes[at[id]].Placed.Position = pos
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}
