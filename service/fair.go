package service

import (
	"context"
	"math"
	"slices"
	"time"
)

// First come, first served across instances (docs/design.md, invariant
// 18). Every order carries its arrival (this instance's clock, or the
// first arrival a buyer told to come back kept, places.go) and each
// queue is kept in arrival order. A worker contends for its SKU's lock
// ranked by its oldest buyer's arrival, so a free lock goes to the
// instance with the oldest buyer waiting; the holder sells only its
// buyers who arrived no later than the oldest other contender it has
// heard of plus FairWindow, and lets the lock go when its next buyer is
// younger than that. Without a lock that ranks (ZooKeeper, Redis down),
// each instance sells in its own arrival order, as before.

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

// turn readies q's worker for its next batch under fair selling and
// returns the latest arrival the batch may take: the lock held or
// obtained ranked by q's oldest buyer, then the oldest other contender
// heard of plus FairWindow; noLimit when nobody else waits, or when the
// SKU sells unlocked. A holder whose oldest buyer is younger than that
// lets the lock go first and contends again by rank. Without a ranked
// locker it does nothing: the batch obtains the lock as it always did.
func (o *Orders) turn(q *skuQueue, hold *leaseHold) int64 {
	hold.unlocked = false
	w := o.cfg.FairWindow.Microseconds()
	line := o.places.ahead(q.id)
	if line != noLimit {
		line += w
	}
	if _, ok := o.locker.(RankedLocker); !ok {
		return line
	}
	head := o.oldest(q)
	if head == noLimit {
		return noLimit
	}
	hold.rank = head
	if hold.lease != nil {
		if until := o.limit(hold.lease); head <= until {
			return min(until, line)
		}
		hold.release() // an older buyer waits elsewhere: its turn
	}
	hold.obtain(context.Background())
	if hold.lease == nil {
		hold.unlocked = true // this batch sells on the database guard, in this instance's order
		return line
	}
	// Another contender older than head may have come just after the
	// lock was free: then the batch takes nothing and the next turn
	// hands the lock over.
	return min(o.limit(hold.lease), line)
}

// awaitLine waits, briefly, while q's next buyer is behind one sent back
// that has yet to come back (places.go): the lock is let go meanwhile.
func (o *Orders) awaitLine(q *skuQueue, t *time.Timer) {
	if o.places.ahead(q.id) == noLimit {
		return
	}
	t.Reset(lineRecheck)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.stop:
	}
}

// lineRecheck is how often a worker held up by a buyer sent back looks
// whether it came back.
const lineRecheck = 5 * time.Millisecond

// limit is the latest arrival a holder of lease may sell: the oldest
// other contender it heard of plus FairWindow.
func (o *Orders) limit(lease Lease) int64 {
	rl, ok := lease.(RankedLease)
	if !ok {
		return noLimit
	}
	r, ok := rl.Contender()
	if !ok {
		return noLimit
	}
	return r + o.cfg.FairWindow.Microseconds()
}
