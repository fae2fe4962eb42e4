package engine

import (
	"time"

	"github.com/seckill/seckill/service"
)

// Tracing (Config.Tracer). A traced order carries its trace and when it
// entered the queue and left it; its batch notes the lock step of its
// turn, when its commit began and the transactions it rode in; the steps
// are recorded once the batch is answered, before its buyers hear.
// Untraced, every hook below is a nil check.

// traced is what a traced order carries through the engine.
type traced struct {
	order         OrderTrace
	queued, taken time.Time
}

// batchTrace is a batch's traced orders and what they share.
type batchTrace struct {
	idx        []int        // the traced orders' places in the batch
	orders     []OrderTrace // their traces, for Tracer.Round
	lock       Step
	commitFrom time.Time
	rounds     []Round // the transactions the batch rode in, in order
}

// traceOrder returns the trace of the order ctx's request carries, nil
// when it is not traced.
func (s *Seller) traceOrder(t OrderTrace) *traced {
	if t == nil {
		return nil
	}
	return &traced{order: t, queued: time.Now()}
}

// readyLease runs the turn's hold.take, timed as the lock step of the
// batch it readies when orders are traced.
func (w *worker) readyLease(head int64, ranked bool) {
	h := &w.hold
	if w.s.cfg.Tracer == nil {
		h.take(head, ranked)
		return
	}
	held, from := h.lease, time.Now()
	h.take(head, ranked)
	lease := LeaseObtained
	switch {
	case h.lease == nil:
		lease = LeaseNone
	case h.lease == held:
		lease = LeaseKept
	}
	w.lockStep = Step{Kind: StepLock, From: from, To: time.Now(), Lease: lease}
}

// traceBatch returns the trace of a batch about to commit, nil when none
// of its orders is traced.
func (w *worker) traceBatch(live []*pending) *batchTrace {
	var bt *batchTrace
	for i, p := range live {
		if p.trace == nil {
			continue
		}
		if bt == nil {
			lock := w.lockStep
			if lock.From.IsZero() { // no lease readied since the worker began: sold unlocked
				lock = Step{Kind: StepLock, From: p.trace.taken, To: p.trace.taken, Lease: LeaseNone}
			}
			bt = &batchTrace{lock: lock, commitFrom: time.Now()}
		}
		bt.idx = append(bt.idx, i)
		bt.orders = append(bt.orders, p.trace.order)
	}
	return bt
}

// finish records the steps of the batch's traced orders: queue, lock,
// commit (its error, or the order's own refusal) and, when the commit was
// confirmed by the replicas or not, that wait.
func (bt *batchTrace) finish(live []*pending, res service.BatchResult, committed time.Time, err error, replicas *Step) {
	for _, i := range bt.idx {
		p := live[i]
		t := p.trace.order
		t.Record(Step{Kind: StepQueue, From: p.trace.queued, To: p.trace.taken})
		lock := bt.lock
		lock.Batch = len(live)
		t.Record(lock)
		commitErr := err
		if err == nil && i < len(res.Outcomes) {
			commitErr = res.Outcomes[i].Err
		}
		t.Record(Step{Kind: StepCommit, From: bt.commitFrom, To: committed, Batch: len(live), Rounds: bt.rounds, Err: commitErr})
		if replicas != nil {
			t.Record(*replicas)
		}
	}
}

// refused records the queue step of a traced order answered without a
// transaction (late, sold out, shutting down).
func (p *pending) refused(err error) {
	if p.trace != nil {
		p.trace.order.Record(Step{Kind: StepQueue, From: p.trace.queued, To: time.Now(), Err: err})
	}
}

// round begins the span of a transaction carrying the traced batches of
// calls, nil when none is traced.
func (g *groupCommit) round(calls []*groupCall, shared bool) Round {
	if g.tracer == nil {
		return nil
	}
	var orders []OrderTrace
	n := 0
	for _, c := range calls {
		n += len(c.b.Requests)
		if c.bt != nil {
			orders = append(orders, c.bt.orders...)
		}
	}
	if len(orders) == 0 {
		return nil
	}
	return g.tracer.Round(orders, len(calls), n, shared)
}

// ended ends round (nil: untraced) with err and notes it in each traced
// batch of calls.
func ended(round Round, calls []*groupCall, err error) {
	if round == nil {
		return
	}
	round.End(err)
	for _, c := range calls {
		if c.bt != nil {
			c.bt.rounds = append(c.bt.rounds, round)
		}
	}
}
