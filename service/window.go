package service

import (
	"context"
	"time"
)

// saleWindow is a SKU's sale window in unix nanos (0: no bound), as read
// by a read begun at read.
type saleWindow struct{ starts, ends, read int64 }

// unbounded is the window of every SKU sold without one.
var unbounded = &saleWindow{}

func windowOf(s SKU, at int64) *saleWindow {
	if s.StartsAt == nil && s.EndsAt == nil {
		return unbounded
	}
	w := &saleWindow{read: at}
	if s.StartsAt != nil {
		w.starts = s.StartsAt.UnixNano()
	}
	if s.EndsAt != nil {
		w.ends = s.EndsAt.UnixNano()
	}
	return w
}

// open reports whether now is in the window, as SKU.Active does.
func (w *saleWindow) open(now int64) bool {
	return (w.starts == 0 || now >= w.starts) && (w.ends == 0 || now < w.ends)
}

// saleClosed reports whether e's sale is known to be off, refusing the
// buyer before the queue. The window is trusted for SoldOutRecheck after
// its read, then re-read (ahead, from half of it: fresh), so another
// instance's change shows within that.
func (d *Directory) saleClosed(ctx context.Context, e *skuEntry) (bool, error) {
	w := e.window.Load()
	now := time.Now().UnixNano()
	if w == nil || w.open(now) {
		return false, nil
	}
	if d.fresh(ctx, e, w.read, now) {
		return true, nil
	}
	r, err := d.reread(ctx, e)
	if err != nil {
		return false, err
	}
	return !r.sku.Active(time.Now()), nil
}
