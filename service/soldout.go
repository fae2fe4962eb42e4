package service

import (
	"context"
	"sync/atomic"
	"time"
)

// maxSoldOutMarks bounds the local mark table: ids come from clients, so
// the table is emptied rather than allowed to grow without end.
const maxSoldOutMarks = 1 << 16

// soldOutMark is this process's belief about one SKU, trusted for
// SoldOutTTL after it was last checked against the shared mark.
type soldOutMark struct {
	mark       atomic.Int64 // as in SoldOutMarks: +version sold out, -version restocked
	checked    atomic.Int64 // unix nanos
	refreshing atomic.Bool
}

// adopt takes m unless the mark held is of a newer version.
func (s *soldOutMark) adopt(m int64) {
	for {
		cur := s.mark.Load()
		if abs(m) < abs(cur) || s.mark.CompareAndSwap(cur, m) {
			return
		}
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func (o *Orders) mark(skuID int64, create bool) *soldOutMark {
	o.marksMu.Lock()
	defer o.marksMu.Unlock()
	m, ok := o.soldOut[skuID]
	if !ok && create {
		if len(o.soldOut) >= maxSoldOutMarks {
			clear(o.soldOut)
		}
		m = &soldOutMark{}
		o.soldOut[skuID] = m
	}
	return m
}

// isSoldOut answers from the local mark while it is fresh (no I/O) and
// otherwise asks the shared mark once per SoldOutTTL per SKU; concurrent
// callers meanwhile use the local answer. An unreachable shared mark
// leaves the local one as it is: the database decides anyway.
func (o *Orders) isSoldOut(ctx context.Context, skuID int64) bool {
	m := o.mark(skuID, true)
	now := time.Now().UnixNano()
	if now-m.checked.Load() < int64(o.cfg.SoldOutTTL) || !m.refreshing.CompareAndSwap(false, true) {
		return m.mark.Load() > 0
	}
	defer m.refreshing.Store(false)
	if shared, err := o.marks.Mark(ctx, skuID); err == nil {
		m.adopt(shared)
	}
	m.checked.Store(now)
	return m.mark.Load() > 0
}

// localSoldOut reports a fresh local sold-out mark, without any I/O.
func (o *Orders) localSoldOut(skuID int64) bool {
	m := o.mark(skuID, false)
	return m != nil && m.mark.Load() > 0 &&
		time.Now().UnixNano()-m.checked.Load() < int64(o.cfg.SoldOutTTL)
}

// markSoldOut records that the SKU had no stock at version, locally and
// in the shared mark for the other instances.
func (o *Orders) markSoldOut(skuID, version int64) {
	o.setMark(context.Background(), skuID, version)
}

// clearSoldOut records a restock at version. Other instances follow
// within SoldOutTTL, when their local mark goes stale.
func (o *Orders) clearSoldOut(ctx context.Context, skuID, version int64) error {
	return o.setMark(ctx, skuID, -version)
}

func (o *Orders) setMark(ctx context.Context, skuID, mark int64) error {
	m := o.mark(skuID, true)
	m.adopt(mark)
	m.checked.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := o.marks.SetMark(ctx, skuID, mark)
	if err != nil {
		o.log.Warn("shared sold-out mark not written", "sku", skuID, "mark", mark, "err", err)
	}
	return err
}
