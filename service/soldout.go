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
	soldOut    atomic.Bool
	checked    atomic.Int64 // unix nanos
	refreshing atomic.Bool
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
// counts as "not known sold out": the database decides.
func (o *Orders) isSoldOut(ctx context.Context, skuID int64) bool {
	m := o.mark(skuID, true)
	now := time.Now().UnixNano()
	if now-m.checked.Load() < int64(o.cfg.SoldOutTTL) || !m.refreshing.CompareAndSwap(false, true) {
		return m.soldOut.Load()
	}
	defer m.refreshing.Store(false)
	soldOut, err := o.marks.SoldOut(ctx, skuID)
	if err != nil {
		soldOut = m.soldOut.Load()
	}
	m.soldOut.Store(soldOut)
	m.checked.Store(now)
	return soldOut
}

// localSoldOut reports a fresh local sold-out mark, without any I/O.
func (o *Orders) localSoldOut(skuID int64) bool {
	m := o.mark(skuID, false)
	return m != nil && m.soldOut.Load() &&
		time.Now().UnixNano()-m.checked.Load() < int64(o.cfg.SoldOutTTL)
}

// markSoldOut records that a committed transaction left the SKU at zero,
// locally and in the shared mark for the other instances.
func (o *Orders) markSoldOut(skuID int64) {
	m := o.mark(skuID, true)
	m.soldOut.Store(true)
	m.checked.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := o.marks.MarkSoldOut(ctx, skuID); err != nil {
		o.log.Warn("shared sold-out mark not set", "sku", skuID, "err", err)
	}
}

// clearSoldOut forgets the marks after a restock. Other instances follow
// within SoldOutTTL, when their local mark goes stale.
func (o *Orders) clearSoldOut(ctx context.Context, skuID int64) error {
	if m := o.mark(skuID, false); m != nil {
		m.soldOut.Store(false)
		m.checked.Store(0)
	}
	return o.marks.ClearSoldOut(ctx, skuID)
}
