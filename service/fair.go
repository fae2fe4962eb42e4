package service

import (
	"context"
	"math"
	"slices"
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
// own arrival order, as before.

// noLimit is the arrival limit of a batch nobody else is waiting for.
const noLimit = math.MaxInt64

// RankedLocker is a Locker whose free lock goes to the lowest rank
// waiting (lock.Client.ObtainRanked): the order path ranks by arrival.
type RankedLocker interface {
	ObtainRanked(ctx context.Context, key string, rank int64) (Lease, error)
}

// RankedLease is a Lease that hears the ranks of the contenders waiting
// for its key (lock.Lock.Contender).
type RankedLease interface {
	Lease
	// Contender returns the lowest rank another contender announced while
	// the lease was held; ok is false when none did.
	Contender() (rank int64, ok bool)
}

// arrivedNow is the arrival stamp of a request arriving now: unix µs.
func arrivedNow() int64 { return time.Now().UnixMicro() }

// insert adds p to q in arrival order: at the back, unless p kept an
// earlier arrival. Called with o.mu held.
func (q *skuQueue) insert(p *pending) {
	w := q.waiting[q.head:]
	if len(w) == 0 || w[len(w)-1].arrived <= p.arrived {
		q.waiting = append(q.waiting, p)
		return
	}
	i, _ := slices.BinarySearchFunc(w, p.arrived, func(e *pending, t int64) int {
		if e.arrived <= t {
			return -1
		}
		return 1
	})
	q.waiting = slices.Insert(q.waiting, q.head+i, p)
}

// bumpYoungest makes room in q, full, for p when p arrived before the
// youngest buyer queued: that one is told busy instead (and keeps its
// place for its retry), so an older buyer never loses its place to a
// younger one. Called with o.mu held.
func (o *Orders) bumpYoungest(q *skuQueue, p *pending) bool {
	if q.len() == 0 {
		return false
	}
	last := len(q.waiting) - 1
	y := q.waiting[last]
	if y.arrived <= p.arrived {
		return false
	}
	q.waiting[last] = nil
	q.waiting = q.waiting[:last]
	if y.state.CompareAndSwap(queued, abandoned) { // else its buyer left
		y.done <- Outcome{Err: ErrBusy}
	}
	return true
}

// oldest returns the arrival of q's oldest waiting buyer, noLimit when
// none waits.
func (o *Orders) oldest(q *skuQueue) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if q.len() == 0 {
		return noLimit
	}
	return q.waiting[q.head].arrived
}

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

// turn readies q's worker for its next batch under fair selling and
// returns what the batch may take. The lock is held or obtained ranked
// by q's oldest buyer; then the batch takes the turn's first turnFloor
// buyers, and after them only those who arrived by the oldest other
// contender heard of plus FairWindow; a holder with no more such buyers
// lets the lock go and contends again by rank. Nobody holds a buyer
// sent back (places.go) out of its place by more than FairWindow. A SKU
// known sold out sells unlocked and unordered: its buyers are refused
// without waiting for anyone's turn. Without a ranked locker each
// instance keeps its own arrival order, as does a batch sold unlocked.
func (o *Orders) turn(q *skuQueue, hold *leaseHold) turnLimit {
	hold.unlocked = false
	if o.localSoldOut(q.id) {
		hold.release() // for the others to learn the sell-out
		hold.rank, hold.unlocked = 0, true
		return free
	}
	lim := free
	if o.holdsLine() {
		lim.line = window(o.places.ahead(q.id), o.cfg.FairWindow)
		lim.until = lim.line
	}
	if _, ok := o.locker.(RankedLocker); !ok {
		return lim
	}
	head := o.oldest(q)
	if head == noLimit {
		return free
	}
	hold.rank = head
	if hold.lease != nil {
		lim.until = min(o.limit(hold.lease), lim.line)
		lim.floor = max(turnFloor-hold.taken, 0)
		if head <= lim.until || lim.floor > 0 {
			return lim
		}
		hold.release() // an older buyer waits elsewhere: its turn
	}
	hold.obtain(context.Background())
	if hold.lease == nil {
		hold.unlocked = true // this batch sells on the database guard, in this instance's order
		return turnLimit{until: lim.line, line: lim.line}
	}
	lim.until = min(o.limit(hold.lease), lim.line)
	lim.floor = turnFloor
	return lim
}

// holdsLine reports whether buyers sent back hold their places against
// the younger: not while the lock store is unreachable (their places
// are not shared then, nor their return), nor while shutting down.
func (o *Orders) holdsLine() bool {
	select {
	case <-o.quit:
		return false
	default:
		return !o.degraded.Load()
	}
}

// awaitLine waits, briefly, while q's next buyer is behind one sent back
// that has yet to come back (places.go): the lock is let go meanwhile.
func (o *Orders) awaitLine(q *skuQueue, t *time.Timer) {
	if !o.holdsLine() || o.places.ahead(q.id) == noLimit {
		return
	}
	t.Reset(lineRecheck)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.stop:
	case <-o.quit:
	}
}

// lineRecheck is how often a worker held up by a buyer sent back looks
// whether it came back.
const lineRecheck = 5 * time.Millisecond

// limit is the latest arrival a holder of lease may sell past its turn's
// floor: the oldest other contender it heard of plus FairWindow.
func (o *Orders) limit(lease Lease) int64 {
	rl, ok := lease.(RankedLease)
	if !ok {
		return noLimit
	}
	r, ok := rl.Contender()
	if !ok {
		return noLimit
	}
	return window(r, o.cfg.FairWindow)
}
