package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seckill/seckill/service"
)

// A group commit merges the batches of different SKUs that are ready at
// the same moment into one transaction (a round), so that many SKUs on
// sale cost the database one transaction per round, not one per SKU. One
// round runs at a time: batches that become ready meanwhile wait and go
// together in the next, so rounds grow with the load. A round still under
// way after roundStall lets the batches behind it lead rounds of their
// own, up to maxRounds at once: one SKU's held row or a slow COMMIT then
// delays the other SKUs by roundStall, not by the whole lock wait.
const (
	maxGroup   = 64
	maxRounds  = 4
	roundStall = 50 * time.Millisecond
)

// groupCommit schedules rounds; the Committer executes them (CommitRound).
// There is no background goroutine: a caller that finds no round under
// way leads one, and hands the lead to the first caller still waiting
// when its round ends, unless another round is still under way.
//
// A call is in pending, or in exactly one round: it leaves pending once,
// under mu (taken into a round, handed the lead, leading after a stall,
// or left by its caller), and a leader is never in pending, so the round
// it takes cannot hold its own call twice nor another leader's. Each call
// is therefore answered, and its done closed, by one run.
type groupCommit struct {
	store  Committer
	linger time.Duration // lingerBefore's longest wait; 0: a round commits at once
	tracer Tracer        // nil: untraced

	mu      sync.Mutex
	pending []*groupCall
	leaders int

	recent [maxGroup]arrival // the latest batches, a ring
	filled int               // slots of recent in use
	next   int               // the slot the next batch takes
	counts map[int64]int     // worthLingering's scratch
	// wake is closed, and set to nil, once pending holds wakeAt calls:
	// the lingering leader's round has doubled. nil while none lingers.
	wake   chan struct{}
	wakeAt int
}

// arrival is one batch given to commit: its SKU and when (unix nanos).
type arrival struct{ sku, at int64 }

type groupCall struct {
	ctx  context.Context
	b    service.Batch
	bt   *batchTrace // nil: no traced order in b
	res  service.BatchResult
	err  error
	done chan struct{} // closed when res and err are final
	lead chan struct{} // closed when this call must lead the next round
}

func newGroupCommit(store Committer, linger time.Duration, tracer Tracer) *groupCommit {
	return &groupCommit{store: store, linger: max(linger, 0), tracer: tracer}
}

// commit commits b: under its SKU's lock (locked), possibly in one
// transaction with other SKUs' batches; without it, in a transaction of
// its own, for such a batch is the one likely to meet another instance's
// holder on its row (a row-lock wait, a version conflict), which in a
// shared round would hold up or fail the other SKUs' batches with it.
// bt, when not nil, traces the batch's orders.
func (g *groupCommit) commit(ctx context.Context, b service.Batch, locked bool, bt *batchTrace) (service.BatchResult, error) {
	if !locked {
		return g.commitBatch(&groupCall{ctx: ctx, b: b, bt: bt})
	}
	c := &groupCall{ctx: ctx, b: b, bt: bt, done: make(chan struct{}), lead: make(chan struct{})}
	g.mu.Lock()
	if g.linger > 0 {
		g.arrived(b.SKUID, time.Now().UnixNano())
	}
	if g.leaders > 0 { // join the next round
		g.pending = append(g.pending, c)
		if g.wake != nil && len(g.pending) >= g.wakeAt {
			close(g.wake)
			g.wake = nil
		}
		g.mu.Unlock()
		if !g.wait(c) {
			return c.res, c.err
		}
		g.mu.Lock() // leading: taken out of pending
	} else {
		g.leaders++ // leading, never in pending
	}
	g.lingerBefore(c)
	round := g.take(c)
	g.mu.Unlock()
	g.run(round)
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
	return c.res, c.err
}

// wait blocks until c is answered or handed the lead, and reports whether
// it leads: handed the lead, or still pending after roundStall with fewer
// than maxRounds rounds under way. A caller whose context ends while its
// batch is pending leaves, uncharged. Once its batch is in a round it
// waits for the round: answering before could say "uncharged" about an
// order that commits.
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
		c.res, c.err = service.BatchResult{}, callerGone(c.ctx)
		return false
	}
	select {
	case <-c.done:
		return false
	case <-c.lead:
		return true
	}
}

// arrived records a batch of sku given at at (unix nanos), for
// worthLingering. Called with g.mu held.
func (g *groupCommit) arrived(sku, at int64) {
	g.recent[g.next] = arrival{sku: sku, at: at}
	g.next = (g.next + 1) % len(g.recent)
	g.filled = min(g.filled+1, len(g.recent))
}

// lingerBefore waits, once, up to g.linger before leader takes its round
// when worthLingering says so; batches that arrive meanwhile join the
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
// round expected within g.linger of now would at least double the round,
// and how many are expected. Each SKU among the latest batches is
// expected at the rate it came at since the oldest of them, at most once:
// a SKU's worker gives one batch at a time, so SKUs already in the round,
// and one SKU on its own, bring nobody to wait for. Called with g.mu held.
func (g *groupCommit) worthLingering(leader *groupCall, now int64) (joiners int, ok bool) {
	round := len(g.pending) + 1 // the leader is not in pending
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
	delete(g.counts, leader.b.SKUID)
	for _, c := range g.pending {
		delete(g.counts, c.b.SKUID)
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

// take removes from pending the round that leader (not in pending) leads:
// leader first, then at most maxGroup-1 more calls, one per SKU, first
// come first served. Called with g.mu held.
func (g *groupCommit) take(leader *groupCall) []*groupCall {
	round := []*groupCall{leader}
	var rest []*groupCall
	seen := map[int64]bool{leader.b.SKUID: true}
	for _, c := range g.pending {
		if len(round) < maxGroup && !seen[c.b.SKUID] {
			seen[c.b.SKUID] = true
			round = append(round, c)
		} else {
			rest = append(rest, c)
		}
	}
	g.pending = rest
	return round
}

// run commits a round and answers every call of it. A call whose caller
// has gone is left out, uncharged. The others share one transaction under
// roundContext. When it fails, nothing of it was committed, and unless no
// transaction could be begun each batch is committed alone, all at once,
// under its own caller's context: one SKU's held row, deadline, deadlock
// or conflict never fails another SKU's buyers.
func (g *groupCommit) run(round []*groupCall) {
	defer func() {
		for _, c := range round {
			close(c.done)
		}
	}()
	var (
		live []*groupCall
		bs   []service.Batch
	)
	for _, c := range round {
		if c.ctx.Err() != nil {
			c.res, c.err = service.BatchResult{}, callerGone(c.ctx)
			continue
		}
		live = append(live, c)
		bs = append(bs, c.b)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := roundContext(live)
	span := g.round(live, true)
	answers, err := g.store.CommitRound(ctx, bs)
	ended(span, live, err)
	cancel()
	switch {
	case err == nil:
		for i, c := range live {
			c.res, c.err = answers[i].BatchResult, answers[i].Err
		}
		return
	case errors.Is(err, service.ErrNoTransaction):
		for _, c := range live {
			c.res, c.err = service.BatchResult{}, err
		}
		return
	}
	var wg sync.WaitGroup
	for _, c := range live {
		wg.Go(func() { c.res, c.err = g.alone(c) })
	}
	wg.Wait()
}

// alone commits c's batch in a transaction of its own, bounded by its
// context.
func (g *groupCommit) alone(c *groupCall) (service.BatchResult, error) {
	if c.ctx.Err() != nil {
		return service.BatchResult{}, callerGone(c.ctx)
	}
	return g.commitBatch(c)
}

// commitBatch runs Committer.CommitBatch for c, traced when c is.
func (g *groupCommit) commitBatch(c *groupCall) (service.BatchResult, error) {
	if c.bt == nil {
		return g.store.CommitBatch(c.ctx, c.b)
	}
	calls := []*groupCall{c}
	span := g.round(calls, false)
	res, err := g.store.CommitBatch(c.ctx, c.b)
	ended(span, calls, err)
	return res, err
}

// callerGone answers a batch whose caller's context ended before anything
// was written for it.
func callerGone(ctx context.Context) error {
	return fmt.Errorf("%w: nothing written, the caller left: %w", service.ErrUnavailable, ctx.Err())
}

// roundContext gives a round half the time its most hurried caller has
// left, so that if the round fails every batch still has half its time to
// commit alone. A round of several SKUs derives from no caller's context:
// one caller's cancellation (a lost lease) does not stop the others'
// orders, and its own batch is stopped by its fence and version. A round
// of one derives from its caller's.
func roundContext(round []*groupCall) (context.Context, context.CancelFunc) {
	parent := context.Background()
	if len(round) == 1 {
		parent = round[0].ctx
	}
	now := time.Now()
	budget := time.Duration(-1)
	for _, c := range round {
		if d, ok := c.ctx.Deadline(); ok && (budget < 0 || d.Sub(now) < budget) {
			budget = d.Sub(now)
		}
	}
	if budget < 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, budget/2)
}
