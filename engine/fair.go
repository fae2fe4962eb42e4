package engine

import (
	"math"
	"time"
)

// First come, first served across instances (docs/design.md, invariant
// 19). Every order carries its arrival (this instance's clock, or the
// first arrival a buyer told to come back kept, places.go) and each
// queue is kept in arrival order. A worker contends for its SKU's lock
// ranked by its oldest buyer's arrival, so a free lock goes to the
// instance with the oldest buyer waiting. A turn of the lock sells the
// holder's turnFloor oldest buyers, then only those who arrived no later
// than the oldest other contender it has heard of plus FairWindow, and
// lets the lock go when its next buyer is younger than that. Without a
// lock that ranks (ZooKeeper, Redis down), each instance sells in its
// own arrival order.

// noLimit is the arrival limit of a batch nobody else is waiting for.
const noLimit = math.MaxInt64

// turnFloor is how many buyers a turn of the lock sells whatever the
// window, if it has them. A handoff costs about a transaction's fixed
// part (a release, a notice, a ranked obtain, and the next batch reads
// the row again); while turns are at least this long, handoffs are at
// most one per turnFloor orders sold, whatever order.fair_window and the
// arrival rate, so they cannot take over the lock's time. It also bounds
// the order: a turn's first buyers are its holder's oldest, no younger
// than any other contender's oldest when it obtained the lock.
const turnFloor = 64

// turnLimit is what fair selling lets a batch take from its queue, in
// arrival order.
type turnLimit struct {
	until int64 // the latest arrival it may take once floor is used
	line  int64 // the latest arrival it may take at all: a buyer sent back holds its place
	floor int   // buyers it may take up to line whatever until says
}

// free is the limit of a batch nobody else waits for.
var free = turnLimit{until: noLimit, line: noLimit}

// window adds w to a limit, saturating at noLimit.
func window(limit int64, w time.Duration) int64 {
	if limit == noLimit {
		return noLimit
	}
	return limit + w.Microseconds()
}

// turn readies the worker for its next batch and returns what the batch
// may take: the one place a batch asks whether its SKU is known sold out
// and which lease it sells under (hold.go). A SKU known sold out sells
// unlocked and unordered: its buyers are refused without waiting for
// anyone's turn, unless one of them asks to wait: buyers join its line
// in arrival order across the instances, as they buy, so that each is
// told the waiters ahead of it. Otherwise, under fair selling, the lock is held or
// obtained ranked by the queue's oldest buyer; the batch takes the turn's
// first turnFloor buyers, and after them only those who arrived by the
// oldest other contender heard of plus FairWindow; a holder with no more
// such buyers lets the lock go and contends again by rank. Nobody holds a
// buyer sent back (places.go) out of its place by more than FairWindow.
// Without a locker that ranks each instance keeps its own arrival order,
// as does a batch sold unlocked.
func (w *worker) turn() turnLimit {
	h := &w.hold
	if w.s.cfg.Tracer != nil {
		w.lockStep = Step{} // none readied yet: sold unlocked unless readyLease says otherwise
	}
	w.soldOut = w.s.skus.SoldOut(w.q.id)
	if w.soldOut && !w.s.queues.waitersQueued(w.q) {
		h.release() // for the others to learn the sell-out
		return free
	}
	lim := free
	if w.holdsLine() {
		lim.line = window(w.s.places.ahead(w.q.id), w.s.cfg.FairWindow)
		lim.until = lim.line
	}
	head := w.s.queues.oldest(w.q)
	if head == noLimit {
		return lim // nothing queued: no lease wanted
	}
	ranked := w.s.locks.locker.Ranks()
	if ranked && h.lease != nil && h.taken >= turnFloor && head > min(w.limit(), lim.line) {
		h.release() // an older buyer waits elsewhere: its turn
	}
	w.readyLease(head, ranked) // h.take, timed when traced

	if !ranked || h.lease == nil { // in this instance's order
		return turnLimit{until: lim.line, line: lim.line}
	}
	lim.until = min(w.limit(), lim.line)
	lim.floor = max(turnFloor-h.taken, 0)
	return lim
}

// holdsLine reports whether buyers sent back hold their places against
// the younger: not while the lock store is unreachable (their places
// are not shared then, nor their return), nor while shutting down.
func (w *worker) holdsLine() bool {
	select {
	case <-w.s.queues.quit:
		return false
	default:
		return !w.s.locks.degraded.Load()
	}
}

// awaitLine waits, briefly, while the queue's next buyer is behind one
// sent back that has yet to come back (places.go): the lock is let go
// meanwhile.
func (w *worker) awaitLine() {
	if !w.holdsLine() || w.s.places.ahead(w.q.id) == noLimit {
		return
	}
	w.wait.Reset(lineRecheck)
	defer w.wait.Stop()
	select {
	case <-w.wait.C:
	case <-w.q.stop:
	case <-w.s.queues.quit:
	}
}

// lineRecheck is how often a worker held up by a buyer sent back looks
// whether it came back.
const lineRecheck = 5 * time.Millisecond

// limit is the latest arrival the holder of the lease may sell past its
// turn's floor: the oldest other contender it heard of plus FairWindow.
func (w *worker) limit() int64 {
	if w.hold.hand == nil {
		return noLimit
	}
	r, ok := w.hold.hand.Contender()
	if !ok {
		return noLimit
	}
	return window(r, w.s.cfg.FairWindow)
}
