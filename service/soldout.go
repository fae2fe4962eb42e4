package service

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// The sold-out fast path. The database is the truth; a SKU's local mark
// (on its skuEntry) answers "sold out" without I/O, and the shared mark
// only spreads a sell-out faster. Bounds:
//
//   - A local "sold out" is trusted for SoldOutRecheck from when its truth
//     was established (the start of the commit or read that found no
//     stock, so a paused process cannot stretch it), then re-read from the
//     database, single-flighted. A restock through another instance is so
//     seen here within sold_out.local_ttl + sold_out.recheck, whatever
//     Redis does.
//   - A shared "sold out" is checked against the database before it
//     refuses anyone: its age is unknown.
//   - A "not sold out" goes to the queue, where the transaction decides.

// observe sets the mark and the sale window from the SKU row as read from
// the database by a read that started at (unix nanos): the truth at the
// time of the read, so it replaces whatever was held.
func (e *skuEntry) observe(s SKU, at int64) {
	e.window.Store(windowOf(s, at))
	if s.Stock > 0 {
		e.mark.Store(-s.Version)
	} else {
		e.mark.Store(s.Version)
	}
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

// isSoldOut answers from the local mark while it is fresh (no I/O). A
// stale "sold out" never answers: the caller waits for a re-read of the
// row (one per SKU in flight, shared by every caller that finds the mark
// stale meanwhile) and answers from it. A "not sold out" asks the shared
// mark once per SoldOutTTL; the others meanwhile go to the queue, where
// the transaction decides.
func (o *Orders) isSoldOut(ctx context.Context, e *skuEntry) (bool, error) {
	now := time.Now().UnixNano()
	if e.mark.Load() > 0 {
		if now-e.confirmed.Load() < int64(o.cfg.SoldOutRecheck) {
			return true, nil
		}
		r, err := o.reread(ctx, e)
		return r.soldOut, err
	}
	if now-e.shared.Load() < int64(o.cfg.SoldOutTTL) || !e.refreshing.CompareAndSwap(false, true) {
		return false, nil
	}
	defer e.refreshing.Store(false)
	e.shared.Store(now)
	if m, err := o.marks.Mark(ctx, e.ref); err == nil && m > abs(e.mark.Load()) {
		// Another instance says it sold out after what we know. Look:
		// one read per sell-out per process.
		r, err := o.reread(ctx, e)
		return r.soldOut, err
	}
	return e.mark.Load() > 0, nil
}

// rowRead is one re-read of a SKU's row, shared by the callers that need
// it while it runs: done is closed once the result is set.
type rowRead struct {
	done    chan struct{}
	soldOut bool
	sku     SKU // the row read, when err is nil
	err     error
	waiters atomic.Int32 // callers that joined it (for tests)
}

// reread returns a read of e's row: the one in flight, else a new one
// (at most one per SKU at a time). The read runs detached from
// ctx, so that the caller that started it leaving does not fail the
// others; each caller waits until its own ctx ends at most.
func (o *Orders) reread(ctx context.Context, e *skuEntry) (*rowRead, error) {
	r := e.reading.Load()
	if r == nil {
		fresh := &rowRead{done: make(chan struct{})}
		if e.reading.CompareAndSwap(nil, fresh) {
			r = fresh
			go func() {
				r.soldOut, r.sku, r.err = o.recheck(context.WithoutCancel(ctx), e)
				e.reading.Store(nil)
				close(r.done)
			}()
		} else if r = e.reading.Load(); r == nil { // ended between the two loads
			return o.reread(ctx, e)
		}
	}
	r.waiters.Add(1)
	select {
	case <-r.done:
		return r, r.err
	case <-ctx.Done():
		return &rowRead{}, fmt.Errorf("%w: waiting for the sku's row: %w", ErrUnavailable, ctx.Err())
	}
}

// recheck reads the SKU's row: the database says whether it is still
// sold out. A restock whose shared mark never got written is published
// again from here.
func (o *Orders) recheck(ctx context.Context, e *skuEntry) (bool, SKU, error) {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.TxTimeout)
	defer cancel()
	at := time.Now().UnixNano()
	s, err := o.store.SKU(ctx, e.ref.ID)
	if err != nil {
		if errors.Is(err, ErrSKUNotFound) {
			o.skus.forget(e.ref.ID)
			return false, SKU{}, ErrSKUNotFound
		}
		return false, SKU{}, unavailable(err)
	}
	if RefOf(s) != e.ref { // a new SKU under the same id
		e = o.skus.learn(s, at)
		return e.mark.Load() > 0, s, nil
	}
	e.observe(s, at)
	if s.Stock > 0 {
		o.publish(ctx, e.ref, -s.Version)
		return false, s, nil
	}
	return true, s, nil
}

// localSoldOut reports a fresh local sold-out mark, without any I/O.
func (o *Orders) localSoldOut(skuID int64) bool {
	e := o.skus.peek(skuID)
	return e != nil && e.mark.Load() > 0 &&
		time.Now().UnixNano()-e.confirmed.Load() < int64(o.cfg.SoldOutRecheck)
}

// markSoldOut records that a commit begun at (unix nanos) left the SKU
// without stock at version, locally and in the shared mark for the other
// instances. The shared mark is read back: a newer one (a restock that
// came while this process was paused after its commit) replaces ours
// here too. A failed shared write only slows the others' fast path: they
// find out from their own transactions.
func (o *Orders) markSoldOut(skuID, version, at int64) {
	e := o.skus.peek(skuID)
	if e == nil {
		return
	}
	if abs(e.mark.Load()) <= version {
		e.confirmed.Store(at)
		e.adopt(version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := o.marks.SetMark(ctx, e.ref, version); err != nil {
		o.log.Warn("shared sold-out mark not written", "sku", skuID, "version", version, "err", err)
		return
	}
	if m, err := o.marks.Mark(ctx, e.ref); err == nil && abs(m) > version {
		e.adopt(m)
	}
}

// Restocked records that s was restocked (or created) through this
// instance: it is sellable here at once, and the shared mark says so to
// the others. A failed shared write is retried a few times, then logged
// and counted: the other instances still see the restock within
// SoldOutTTL + SoldOutRecheck, from the database.
func (o *Orders) Restocked(ctx context.Context, s SKU) {
	e := o.skus.learn(s, time.Now().UnixNano())
	if s.Stock > 0 {
		o.publish(ctx, e.ref, -s.Version)
	}
}

// publishAttempts bounds the writes of one restock's shared mark.
const publishAttempts = 3

func (o *Orders) publish(ctx context.Context, ref SKURef, mark int64) {
	var err error
	for attempt := range publishAttempts {
		if attempt > 0 {
			backoff(ctx, attempt+4) // 16ms, 32ms ceilings
		}
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err = o.marks.SetMark(actx, ref, mark)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		o.log.Error("restock not published to the shared sold-out mark; other instances see it from the database within the recheck bound",
			"sku", ref.ID, "mark", mark, "err", err)
		o.obs.MarkUnpublished()
	}
}
