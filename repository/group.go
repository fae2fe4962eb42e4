package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seckill/seckill/service"
)

// maxGroup bounds the SKUs that share one transaction. One round is under
// way at a time: batches that become ready meanwhile wait for it and go
// together in the next, so rounds grow with the load and the database runs
// fewer, larger transactions (docs/performance.md). A round still under
// way after roundStall lets the batches waiting behind it lead rounds of
// their own, up to maxRounds at once: one SKU's held row (a wait of up to
// sharedLockWait) or a slow COMMIT then delays the other SKUs by
// roundStall, not by the whole wait.
const (
	maxGroup   = 64
	maxRounds  = 4
	roundStall = 50 * time.Millisecond
)

// Option configures a Stock.
type Option func(*Stock)

// GroupLinger lets the leader of a group-commit round wait up to d, once,
// before it takes the round, when the batches of other SKUs expected
// within d would at least double the round (groupCommit.worthLingering).
// At a moderate rate spread over many SKUs, each SKU's batch holds about
// one order and finds few others ready, so without it nearly every batch
// pays a transaction of its own. One SKU alone never waits: its worker
// has no other batch to wait for. Default 0: a round commits at once. The
// service sets it to order.linger, the latency it already trades per SKU.
func GroupLinger(d time.Duration) Option {
	return func(s *Stock) { s.group.linger = max(d, 0) }
}

// groupCommit merges the batches of different SKUs that are ready at the
// same moment into one transaction: with many SKUs on sale, the database
// then runs one transaction per round instead of one per SKU. There is no
// background goroutine: a caller that finds no round under way leads one,
// and hands the lead to the first caller still waiting when its round
// ends, unless another round is still under way (that one's leader hands
// it on); a caller left waiting for roundStall leads a round of its own
// (a failed round's batches are retried alone on goroutines that end with
// the round).
type groupCommit struct {
	mu      sync.Mutex
	pending []*groupCall
	leaders int

	linger time.Duration     // GroupLinger; 0: never wait
	recent [maxGroup]arrival // the latest batches, a ring; guarded by mu
	filled int               // slots of recent in use
	next   int               // the slot the next batch takes
	counts map[int64]int     // worthLingering's scratch
	// wake is closed, and set to nil, once pending holds wakeAt calls:
	// the lingering leader's round has doubled. nil while none lingers.
	wake   chan struct{}
	wakeAt int
}

// arrival is one batch given to commitShared: its SKU and when (unix nanos).
type arrival struct{ sku, at int64 }

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
	g.arrived(b.SKUID)
	g.pending = append(g.pending, c)
	if g.wake != nil && len(g.pending) >= g.wakeAt {
		close(g.wake)
		g.wake = nil
	}
	if g.leaders > 0 { // join the next round
		g.mu.Unlock()
		if !g.wait(c) {
			return c.m.res, c.m.err
		}
		g.mu.Lock() // handed the lead, and taken out of pending
	} else {
		g.leaders++
	}
	g.lingerBefore(c)
	round := g.take(c)
	g.mu.Unlock()
	s.runRound(round)
	g.mu.Lock()
	if len(g.pending) > 0 && g.leaders == 1 {
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

// wait blocks until c is answered or handed the lead, and reports whether
// it leads: handed the lead, or still pending after roundStall with fewer
// than maxRounds rounds under way. A caller whose context ends while its
// batch is still pending leaves, answered with that error: nothing was
// written for it. Once its batch is in a round it waits for the round,
// since answering before the round ends could tell a buyer "uncharged"
// about an order that commits.
func (g *groupCommit) wait(c *groupCall) (lead bool) {
	stall := time.NewTimer(roundStall)
	defer stall.Stop()
	for waiting := true; waiting; {
		select {
		case <-c.done:
			return false
		case <-c.lead:
			return true
		case <-stall.C:
			if g.leadStalled(c) {
				return true
			}
			stall.Reset(roundStall)
		case <-c.ctx.Done():
			waiting = false
		}
	}
	g.mu.Lock()
	left := g.remove(c)
	g.mu.Unlock()
	if left {
		c.m.res, c.m.err = service.BatchResult{}, callerGone(c.ctx)
		return false
	}
	select {
	case <-c.done:
		return false
	case <-c.lead:
		return true
	}
}

// arrived records a batch of sku given to commitShared. Called with g.mu
// held.
func (g *groupCommit) arrived(sku int64) {
	if g.linger > 0 {
		g.arrivedAt(sku, time.Now().UnixNano())
	}
}

func (g *groupCommit) arrivedAt(sku, at int64) {
	g.recent[g.next] = arrival{sku: sku, at: at}
	g.next = (g.next + 1) % len(g.recent)
	g.filled = min(g.filled+1, len(g.recent))
}

// lingerBefore waits, once, up to g.linger before leader takes its round
// when worthLingering says so; the batches that arrive meanwhile join the
// round. The wait ends early once the batches expected have come, or
// when the leader's caller leaves. One leader lingers at a time. Called
// and returns with g.mu held; releases it while waiting.
func (g *groupCommit) lingerBefore(leader *groupCall) {
	if g.wake != nil {
		return
	}
	joiners, ok := g.worthLingering(leader, time.Now().UnixNano())
	if !ok {
		return
	}
	wake := make(chan struct{})
	g.wake, g.wakeAt = wake, len(g.pending)+joiners
	g.mu.Unlock()
	t := time.NewTimer(g.linger)
	select {
	case <-t.C:
	case <-wake:
	case <-leader.ctx.Done():
	}
	t.Stop()
	g.mu.Lock()
	if g.wake == wake {
		g.wake = nil
	}
}

// worthLingering reports whether the batches of SKUs not yet in leader's
// round that are expected within g.linger of now would at least double
// the round, and how many are expected (whole ones). Each SKU seen among
// the latest batches is expected at the rate it came at since the oldest
// of them (so a stream that stopped counts less the longer it has
// stopped), at most once: a SKU's worker gives one batch at a time, so
// the SKUs already in the round, and a single SKU on its own, bring
// nobody to wait for. Called with g.mu held.
func (g *groupCommit) worthLingering(leader *groupCall, now int64) (joiners int, ok bool) {
	round := len(g.pending)
	if !slices.Contains(g.pending, leader) {
		round++
	}
	if g.linger <= 0 || round >= maxGroup || g.filled < 2 {
		return 0, false
	}
	oldest := g.recent[(g.next-g.filled+len(g.recent))%len(g.recent)].at
	span := float64(now - oldest)
	if span <= 0 {
		return 0, false
	}
	if g.counts == nil {
		g.counts = make(map[int64]int, len(g.recent))
	}
	clear(g.counts)
	for _, a := range g.recent[:g.filled] {
		g.counts[a.sku]++
	}
	delete(g.counts, leader.m.b.SKUID)
	for _, c := range g.pending {
		delete(g.counts, c.m.b.SKUID)
	}
	expected := 0.0
	for _, n := range g.counts {
		expected += min(1, float64(n)*float64(g.linger)/span)
	}
	return int(expected), expected >= float64(round)
}

// leadStalled makes c, still pending behind a stalled round, the leader
// of a round of its own, if fewer than maxRounds are under way.
func (g *groupCommit) leadStalled(c *groupCall) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leaders >= maxRounds || !g.remove(c) {
		return false // c may have been handed the lead or taken meanwhile
	}
	g.leaders++
	return true
}

// remove takes c out of pending, reporting whether it was there. Called
// with g.mu held.
func (g *groupCommit) remove(c *groupCall) bool {
	for i, p := range g.pending {
		if p == c {
			g.pending = slices.Delete(g.pending, i, i+1)
			return true
		}
	}
	return false
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

// runRound commits a round and answers every call of it. A call whose
// caller has already gone is left out, uncharged. The others share one
// transaction under roundContext, waiting at most sharedLockWait for any
// row. When it fails for any reason but an unreachable database, nothing
// of it was committed, and each batch is committed alone, all at once,
// under its own caller's context: one SKU's held row, deadline, deadlock
// or conflict never fails another SKU's buyers.
func (s *Stock) runRound(round []*groupCall) {
	defer func() {
		for _, c := range round {
			close(c.done)
		}
	}()
	var (
		live []*groupCall
		ms   []*member
	)
	for _, c := range round {
		if c.ctx.Err() != nil {
			c.m.res, c.m.err = service.BatchResult{}, callerGone(c.ctx)
			continue
		}
		live = append(live, c)
		ms = append(ms, &c.m)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := roundContext(live)
	err := s.commitMySQL(ctx, ms, sharedLockWait)
	cancel()
	switch {
	case err == nil:
		return
	case errors.Is(err, errUnreachable):
		for _, c := range live {
			c.m.res, c.m.err = service.BatchResult{}, translateBatch(err, c.m.b)
		}
		return
	}
	var wg sync.WaitGroup
	for _, c := range live {
		wg.Go(func() { c.m.res, c.m.err = s.commitAlone(c.ctx, c.m.b) })
	}
	wg.Wait()
}

// commitAlone commits b in a transaction of its own, bounded by ctx.
func (s *Stock) commitAlone(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	if ctx.Err() != nil {
		return service.BatchResult{}, callerGone(ctx)
	}
	m := &member{b: b}
	if err := s.commitMySQL(ctx, []*member{m}, lockWaitUntil(ctx)); err != nil {
		return service.BatchResult{}, translateBatch(err, b)
	}
	return m.res, m.err
}

// callerGone answers a batch whose caller's context ended before anything
// was written for it.
func callerGone(ctx context.Context) error {
	return fmt.Errorf("%w: nothing written, the caller left: %w", service.ErrUnavailable, ctx.Err())
}

// roundContext gives a shared round half the time that its most hurried
// caller has left, so that if the round fails every batch still has half
// its time to commit alone. It derives from no caller's context: one
// caller's cancellation does not stop the others' orders (a caller whose
// lease was lost is stopped by its fence and version).
func roundContext(round []*groupCall) (context.Context, context.CancelFunc) {
	now := time.Now()
	budget := time.Duration(-1)
	for _, c := range round {
		if d, ok := c.ctx.Deadline(); ok && (budget < 0 || d.Sub(now) < budget) {
			budget = d.Sub(now)
		}
	}
	if budget < 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), budget/2)
}
