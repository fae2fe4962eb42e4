package service

import (
	"context"
	"time"
)

// AgeSoldOutMark makes sku's local sold-out mark on o look confirmed d
// earlier: the instance sat idle that long, without the test waiting.
func AgeSoldOutMark(o *Orders, skuID int64, d time.Duration) {
	if e := o.skus.peek(skuID); e != nil {
		e.confirmed.Add(-int64(d))
	}
}

// RowReadWaiters reports how many callers joined the re-read of sku's row
// in flight on o (0 when none is).
func RowReadWaiters(o *Orders, skuID int64) int {
	if e := o.skus.peek(skuID); e != nil {
		if r := e.reading.Load(); r != nil {
			return int(r.waiters.Load())
		}
	}
	return 0
}

// AgeSaleWindow makes the sale window of sku held by o look read d
// earlier.
func AgeSaleWindow(o *Orders, skuID int64, d time.Duration) {
	if e := o.skus.peek(skuID); e != nil {
		if w := e.window.Load(); w != nil && w != unbounded {
			aged := *w
			aged.read -= int64(d)
			e.window.Store(&aged)
		}
	}
}

// GroupCommit is the order path's group commit, for the tests of rounds.
type GroupCommit = groupCommit

// NewGroupCommit returns the group commit the order path runs over store.
func NewGroupCommit(store Store, linger time.Duration) *GroupCommit {
	return newGroupCommit(store, linger)
}

// Commit is what a worker holding its SKU's lock calls for a batch.
func (g *groupCommit) Commit(ctx context.Context, b Batch) (BatchResult, error) {
	return g.commit(ctx, b)
}

// RunRound runs one round of bs, batch i under ctxs[i], and returns each
// batch's answer.
func (g *groupCommit) RunRound(ctxs []context.Context, bs []Batch) ([]BatchResult, []error) {
	round := make([]*groupCall, len(bs))
	for i, b := range bs {
		round[i] = &groupCall{ctx: ctxs[i], b: b, done: make(chan struct{}), lead: make(chan struct{})}
	}
	g.run(round)
	res, errs := make([]BatchResult, len(bs)), make([]error, len(bs))
	for i, c := range round {
		res[i], errs[i] = c.res, c.err
	}
	return res, errs
}

// TakeEveryRound makes g look as if maxRounds rounds were under way, until
// the returned func is called; that reports how many calls were pending.
func (g *groupCommit) TakeEveryRound() (free func() (pending int)) {
	g.mu.Lock()
	g.leaders = maxRounds
	g.mu.Unlock()
	return func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.leaders = 0
		return len(g.pending)
	}
}

// Arrived records a batch of sku given to g ago, as if it had come then:
// the arrivals worthLingering weighs.
func (g *groupCommit) Arrived(sku int64, ago time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.arrivedAt(sku, time.Now().Add(-ago).UnixNano())
}

// Lingering reports whether a leader of g lingers before taking its round.
func (g *groupCommit) Lingering() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.wake != nil
}

// QueuedArrivals returns the arrival (unix µs) of every buyer queued for
// sku on o, by user id.
func QueuedArrivals(o *Orders, skuID int64) map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int64{}
	if q := o.queues[skuID]; q != nil {
		for _, p := range q.waiting[q.head:] {
			out[p.req.UserID] = p.arrived
		}
	}
	return out
}

// KnowsPlace reports whether o remembers a place for the request.
func KnowsPlace(o *Orders, r OrderRequest) bool {
	o.places.mu.Lock()
	defer o.places.mu.Unlock()
	_, ok := o.places.byKey[placeKey{r.SKUID, r.UserID, r.IdempotencyKey}]
	return ok
}

// TurnFloor is how many buyers a turn of the lock sells whatever the
// fair window (fair.go).
const TurnFloor = turnFloor
