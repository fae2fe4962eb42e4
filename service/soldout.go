package service

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/backoff"
)

// The sold-out fast path. The database is the truth; the local mark
// answers "sold out" without I/O, and the shared mark spreads a sell-out.
//
//   - A local "sold out" is trusted for SoldOutRecheck from the start of
//     the commit or read that found no stock (a pause cannot stretch it),
//     then re-read, so another instance's restock shows here within
//     sold_out.local_ttl + sold_out.recheck whatever Redis does. The
//     re-read starts ahead, in the background, once half of that has
//     passed (fresh): a SKU asked all the time is confirmed again before
//     its mark expires, and its buyers wait for a read only when one
//     took longer than half the recheck.
//   - A shared "sold out" is checked against the database: its age is
//     unknown.
//   - A "not sold out" goes to the queue, where the transaction decides.

// observe sets the mark and window from s as read by a read begun at
// (unix nanos), unless the entry holds a newer version learned after that
// read began (a restock or an edit made here meanwhile): a read never
// takes back what happened after it began. A newer version learned before
// the read (a database restored from a backup) is replaced: the database
// is the truth.
func (e *skuEntry) observe(s SKU, at int64) {
	m := s.Version
	if s.Stock > 0 {
		m = -s.Version
	}
	for {
		cur := e.mark.Load()
		if abs(cur) > s.Version && e.confirmed.Load() > at {
			return
		}
		if e.mark.CompareAndSwap(cur, m) {
			break
		}
	}
	e.window.Store(windowOf(s, at))
	e.confirmed.Store(at)
}

// adopt takes m unless the mark held is of a newer version.
func (e *skuEntry) adopt(m int64) {
	for {
		cur := e.mark.Load()
		if abs(m) < abs(cur) || e.mark.CompareAndSwap(cur, m) {
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

// isSoldOut answers from the local mark while it is fresh. A stale "sold
// out" waits for a shared re-read of the row; a "not sold out" asks the
// shared mark at most once per SoldOutTTL.
func (d *Directory) isSoldOut(ctx context.Context, e *skuEntry) (bool, error) {
	now := time.Now().UnixNano()
	if e.mark.Load() > 0 {
		if d.fresh(ctx, e, e.confirmed.Load(), now) {
			return true, nil
		}
		r, err := d.reread(ctx, e)
		return r.soldOut, err
	}
	if now-e.shared.Load() < int64(d.cfg.SoldOutTTL) || !e.refreshing.CompareAndSwap(false, true) {
		return false, nil
	}
	defer e.refreshing.Store(false)
	e.shared.Store(now)
	if m, err := d.marks.Mark(ctx, e.ref); err == nil && m > abs(e.mark.Load()) {
		// Another instance sold out after what we know: check the row.
		r, err := d.reread(ctx, e)
		return r.soldOut, err
	}
	return e.mark.Load() > 0, nil
}

// rowRead is one re-read of a SKU's row, shared by the callers that need
// it; done is closed once the result is set.
type rowRead struct {
	done    chan struct{}
	soldOut bool
	sku     SKU // the row read, when err is nil
	err     error
	waiters atomic.Int32 // callers that joined it (for tests)
}

// fresh reports whether what e's row showed at confirmed (unix nanos)
// may still answer at now: for SoldOutRecheck. Past half of it, it starts
// the row's re-read unless one is in flight, and does not wait for it.
func (d *Directory) fresh(ctx context.Context, e *skuEntry, confirmed, now int64) bool {
	age, recheck := now-confirmed, int64(d.cfg.SoldOutRecheck)
	if age >= recheck {
		return false
	}
	if age >= recheck/2 && e.reading.Load() == nil {
		d.startRead(ctx, e)
	}
	return true
}

// reread returns the read of e's row in flight, else starts one, once it
// ends. The read ignores ctx's cancellation, so the caller that started
// it leaving does not fail the others; each waits at most until its own
// ctx ends.
func (d *Directory) reread(ctx context.Context, e *skuEntry) (*rowRead, error) {
	r := d.startRead(ctx, e)
	r.waiters.Add(1)
	select {
	case <-r.done:
		return r, r.err
	case <-ctx.Done():
		return &rowRead{}, fmt.Errorf("%w: waiting for the sku's row: %w", ErrUnavailable, ctx.Err())
	}
}

// startRead returns the read of e's row in flight, else starts one.
func (d *Directory) startRead(ctx context.Context, e *skuEntry) *rowRead {
	for {
		if r := e.reading.Load(); r != nil {
			return r
		}
		r := &rowRead{done: make(chan struct{})}
		if e.reading.CompareAndSwap(nil, r) {
			go func() {
				r.soldOut, r.sku, r.err = d.recheck(context.WithoutCancel(ctx), e)
				e.reading.Store(nil)
				close(r.done)
			}()
			return r
		}
	}
}

// recheck reads whether the SKU is still sold out, and publishes again a
// restock whose shared mark was never written.
func (d *Directory) recheck(ctx context.Context, e *skuEntry) (bool, SKU, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadTimeout)
	defer cancel()
	at := time.Now().UnixNano()
	s, err := d.store.SKU(ctx, e.ref.ID)
	if err != nil {
		if errors.Is(err, ErrSKUNotFound) {
			d.Forget(e.ref.ID)
			return false, SKU{}, ErrSKUNotFound
		}
		return false, SKU{}, unavailable(err)
	}
	if RefOf(s) != e.ref { // a new SKU under the same id
		e = d.learn(s, at)
		return e.mark.Load() > 0, s, nil
	}
	e.observe(s, at)
	if s.Stock > 0 {
		d.publish(ctx, e.ref, -s.Version)
		return false, s, nil
	}
	return true, s, nil
}

// SoldOut reports a fresh local sold-out mark of skuID, without any I/O.
func (d *Directory) SoldOut(skuID int64) bool {
	e := d.peek(skuID)
	return e != nil && e.mark.Load() > 0 &&
		time.Now().UnixNano()-e.confirmed.Load() < int64(d.cfg.SoldOutRecheck)
}

// MarkSoldOut records, locally and in the shared mark, that a commit begun
// at (unix nanos) left the SKU without stock at version. A newer shared
// mark (a restock during a pause) wins; a failed write only slows the
// others' fast path.
func (d *Directory) MarkSoldOut(skuID, version, at int64) {
	e := d.peek(skuID)
	if e == nil {
		return
	}
	if abs(e.mark.Load()) <= version {
		e.confirmed.Store(at)
		e.adopt(version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := d.marks.SetMark(ctx, e.ref, version); err != nil {
		d.log.Warn("shared sold-out mark not written", "sku", skuID, "version", version, "err", err)
		return
	}
	if m, err := d.marks.Mark(ctx, e.ref); err == nil && abs(m) > version {
		e.adopt(m)
	}
}

// Restocked makes s, restocked or created here, sellable at once and tells
// the other instances through the shared mark. A write that keeps failing
// is logged and counted; they then see the restock from the database
// within SoldOutTTL + SoldOutRecheck.
func (d *Directory) Restocked(ctx context.Context, s SKU) {
	d.obs.Waiters(s.ID, s.Waiters)
	e := d.learn(s, time.Now().UnixNano())
	if s.Stock > 0 {
		d.publish(ctx, e.ref, -s.Version)
	}
}

// Allotted hears of waiting orders given units by a transaction that
// returned them through this instance (a cancel, an expiry, a restock),
// once it committed: the one place every allocation passes, counted here.
func (d *Directory) Allotted(_ context.Context, orders []Order) {
	if len(orders) == 0 {
		return
	}
	d.obs.Allotted(len(orders))
	ids := make([]int64, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
	}
	d.Changed(ids...)
}

// Tell makes w hear of every order a commit through this instance
// changes: the waiters given units (Allotted), and those paid, cancelled,
// expired or lapsed (Changed). Call it before serving.
func (d *Directory) Tell(w *Watch) { d.watch = w }

// Changed hears of orders a commit through this instance changed, once
// it committed: their long-polls, here and on every instance, are woken.
func (d *Directory) Changed(ids ...int64) { d.watch.Changed(ids...) }

// publishAttempts bounds the writes of one restock's shared mark.
const publishAttempts = 3

func (d *Directory) publish(ctx context.Context, ref SKURef, mark int64) {
	var err error
	for attempt := range publishAttempts {
		if attempt > 0 {
			backoff.Wait(ctx, attempt+4) // 16ms, 32ms ceilings
		}
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err = d.marks.SetMark(actx, ref, mark)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		d.log.ErrorContext(ctx, "restock not published to the shared sold-out mark; other instances see it from the database within the recheck bound",
			"sku", ref.ID, "mark", mark, "err", err)
		d.obs.MarkUnpublished()
	}
}
