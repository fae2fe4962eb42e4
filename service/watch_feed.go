package service

import (
	"context"
	"slices"
	"time"
)

// publishTimeout bounds one publish; a message not sent in time is heard
// through the recheck.
const publishTimeout = time.Second

// publishLoop publishes the pending ids, in messages of publishMax, each
// time Changed kicks it, until Close; then once more.
func (w *Watch) publishLoop() {
	for {
		select {
		case <-w.kick:
			w.publishPending()
		case <-w.stop:
			w.publishPending()
			return
		}
	}
}

// publishPending takes the pending ids and publishes them.
func (w *Watch) publishPending() {
	w.mu.Lock()
	ids, at := w.pending, w.since
	w.pending = nil
	w.mu.Unlock()
	for chunk := range slices.Chunk(ids, publishMax) {
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		err := w.feed.Publish(ctx, OrderChange{IDs: chunk, At: at, From: w.self})
		cancel()
		if err != nil {
			w.log.Warn("order changes not published; other instances' long-polls hear them at the recheck", "orders", len(chunk), "err", err)
		}
	}
}

// recheckLoop reads the held orders again every Recheck until Close.
func (w *Watch) recheckLoop() {
	if w.cfg.Max <= 0 || w.cfg.Recheck <= 0 {
		return
	}
	t := time.NewTicker(w.cfg.Recheck)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.recheck()
		case <-w.stop:
			return
		}
	}
}

// recheck reads every held order in one read per publishMax of them and
// wakes the polls whose order differs: a change whose message was lost
// is heard within Recheck.
func (w *Watch) recheck() {
	w.mu.Lock()
	ids := make([]int64, 0, len(w.held))
	for id := range w.held {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	for chunk := range slices.Chunk(ids, publishMax) {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Recheck)
		orders, err := w.store.OrdersByID(ctx, chunk)
		cancel()
		if err != nil {
			w.log.Warn("long-polls' recheck could not read their orders; next interval", "orders", len(chunk), "err", err)
			return
		}
		w.wakeDiffering(orders)
	}
}

// wakeDiffering wakes the polls of orders whose revision is not theirs.
func (w *Watch) wakeDiffering(orders []Order) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range orders {
		rev := o.Revision()
		for _, p := range w.held[o.ID] {
			if p.rev == rev {
				continue
			}
			select {
			case p.wake <- time.Time{}:
			default:
			}
		}
	}
}
