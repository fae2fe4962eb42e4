package repository

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seckill/seckill/service"
)

// maxGroup bounds the SKUs that share one transaction, and maxRounds the
// shared transactions under way at once: rounds overlap their round trips
// (each of which also waits for the scheduler under load) while still
// sparing the database one transaction per SKU.
const (
	maxGroup  = 64
	maxRounds = 4
)

// groupCommit merges the batches of different SKUs that are ready at the
// same moment into one transaction: with many SKUs on sale, the database
// then runs one transaction per round instead of one per SKU. There is no
// background goroutine: a caller that finds fewer than maxRounds rounds
// under way leads one, and hands the lead to the first caller still
// waiting when its round ends.
type groupCommit struct {
	mu      sync.Mutex
	pending []*groupCall
	leaders int
}

type groupCall struct {
	ctx  context.Context
	m    member
	done chan struct{} // closed when m.res/m.err are final
	lead chan struct{} // closed when this call must lead the next round
}

// commitShared commits b, possibly in one transaction with other SKUs'.
func (s *Stock) commitShared(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	c := &groupCall{ctx: ctx, m: member{b: b}, done: make(chan struct{}), lead: make(chan struct{})}
	g := &s.group
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if g.leaders >= maxRounds {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.m.res, c.m.err
		case <-c.lead: // handed the lead, and taken out of pending
		}
		g.mu.Lock()
	} else {
		g.leaders++
	}
	round := g.take(c)
	g.mu.Unlock()
	s.runRound(round)
	g.mu.Lock()
	if len(g.pending) > 0 {
		next := g.pending[0]
		g.pending[0] = nil
		g.pending = g.pending[1:]
		close(next.lead)
	} else {
		g.leaders--
	}
	g.mu.Unlock()
	<-c.done // the leader's own call is always in its round
	return c.m.res, c.m.err
}

// take removes from pending the round that leader leads: leader first,
// then at most maxGroup-1 more calls, one per SKU, first come first
// served. Called with g.mu held.
func (g *groupCommit) take(leader *groupCall) []*groupCall {
	round := []*groupCall{leader}
	var rest []*groupCall
	seen := map[int64]bool{leader.m.b.SKUID: true}
	for _, c := range g.pending {
		if c == leader {
			continue
		}
		if len(round) < maxGroup && !seen[c.m.b.SKUID] {
			seen[c.m.b.SKUID] = true
			round = append(round, c)
		} else {
			rest = append(rest, c)
		}
	}
	g.pending = rest
	return round
}

// runRound commits a round and answers every call of it. When the shared
// transaction fails on a conflict (one SKU's guard did not hold, a
// concurrent duplicate key), each batch is retried alone, so one SKU's
// contention never fails another's.
func (s *Stock) runRound(round []*groupCall) {
	defer func() {
		for _, c := range round {
			close(c.done)
		}
	}()
	ms := make([]*member, len(round))
	for i, c := range round {
		ms[i] = &c.m
	}
	ctx, cancel := roundContext(round)
	defer cancel()
	err := s.commitMySQL(ctx, ms)
	if err == nil {
		return
	}
	if len(round) == 1 || !errors.Is(translate(err, service.ErrSKUNotFound, false), service.ErrConflict) {
		for _, c := range round {
			c.m.res, c.m.err = service.BatchResult{}, translateBatch(err, c.m.b)
		}
		return
	}
	for _, c := range round {
		c.m.res, c.m.err = service.BatchResult{}, nil
		if err := s.commitMySQL(c.ctx, []*member{&c.m}); err != nil {
			c.m.res, c.m.err = service.BatchResult{}, translateBatch(err, c.m.b)
		}
	}
}

// roundContext ends at the earliest deadline of the round's callers. It is
// not cancelled with any one of them: the others' orders still commit,
// and a caller whose lease was lost is stopped by its fence and version.
func roundContext(round []*groupCall) (context.Context, context.CancelFunc) {
	var earliest time.Time
	for _, c := range round {
		if d, ok := c.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if earliest.IsZero() {
		return context.WithCancel(context.Background())
	}
	return context.WithDeadline(context.Background(), earliest)
}
