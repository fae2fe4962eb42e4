package engine

import (
	"context"
	"time"

	"github.com/seckill/seckill/service"
)

// GroupCommit is the order path's group commit, for the tests of rounds.
type GroupCommit = groupCommit

// NewGroupCommit returns the group commit the order path runs over store.
func NewGroupCommit(store Committer, linger time.Duration) *GroupCommit {
	return newGroupCommit(store, linger, nil)
}

// Commit is what a worker holding its SKU's lock calls for a batch.
func (g *groupCommit) Commit(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	return g.commit(ctx, b, true, nil)
}

// RunRound runs one round of bs, batch i under ctxs[i], and returns each
// batch's answer.
func (g *groupCommit) RunRound(ctxs []context.Context, bs []service.Batch) ([]service.BatchResult, []error) {
	round := make([]*groupCall, len(bs))
	for i, b := range bs {
		round[i] = &groupCall{ctx: ctxs[i], b: b, done: make(chan struct{}), lead: make(chan struct{})}
	}
	g.run(round)
	res, errs := make([]service.BatchResult, len(bs)), make([]error, len(bs))
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
	g.arrived(sku, time.Now().Add(-ago).UnixNano())
}

// Lingering reports whether a leader of g lingers before taking its round.
func (g *groupCommit) Lingering() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.wake != nil
}

// QueuedArrivals returns the arrival (unix µs) of every buyer queued for
// sku on s, by user id.
func QueuedArrivals(s *Seller, skuID int64) map[string]int64 {
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	out := map[string]int64{}
	if q := s.queues.m[skuID]; q != nil {
		for _, p := range q.waiting[q.head:] {
			out[p.req.UserID] = p.arrived
		}
	}
	return out
}

// KnowsPlace reports whether s remembers a place for the request.
func KnowsPlace(s *Seller, r service.OrderRequest) bool {
	s.places.mu.Lock()
	defer s.places.mu.Unlock()
	_, ok := s.places.byKey[placeKey{r.SKUID, r.UserID, r.IdempotencyKey}]
	return ok
}

// TurnFloor is how many buyers a turn of the lock sells whatever the
// fair window (fair.go).
const TurnFloor = turnFloor
