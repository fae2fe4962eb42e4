package engine

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/service"
)

// pending is one buyer waiting for its answer.
type pending struct {
	req     service.OrderRequest
	arrived int64                // unix µs: its arrival here, or its first, kept (fair.go)
	expires int64                // unix nanos; 0: no deadline of the queue's
	state   atomic.Int32         // queued → taken by the worker, or queued → abandoned
	done    chan service.Outcome // buffered: the worker never blocks on it
	trace   *traced              // nil: not traced (trace.go)
}

const (
	queued int32 = iota
	taken
	abandoned
)

// skuQueue is one SKU's waiting buyers. It grows with its content (up to
// QueueMax), so that an idle or lightly used SKU costs a few hundred bytes.
type skuQueue struct {
	id       int64
	waiting  []*pending // guarded by queues.mu; waiting[head:] is the queue, by arrival
	head     int
	waits    int           // of waiting[head:], those who ask to wait; guarded by queues.mu
	wake     chan struct{} // capacity 1: "something was queued"
	stop     chan struct{} // closed when evicted: its worker exits
	arrivals arrivals      // guarded by queues.mu

	idle       *idleList // the list q is on, if any; guarded by queues.mu
	prev, next *skuQueue // on idle
	sold       bool      // its last batch created an order; the worker's own
	// unconfirmed holds a token per committed batch awaiting its
	// replicas' confirmation (confirmThenAnswer).
	unconfirmed chan struct{}
}

func (q *skuQueue) len() int { return len(q.waiting) - q.head }

// insert adds p to q in arrival order: at the back, unless p kept an
// earlier arrival (fair.go). Called with queues.mu held.
func (q *skuQueue) insert(p *pending) {
	if p.req.Wait {
		q.waits++
	}
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

// shrinkAbove is the capacity above which an emptied queue lets its
// array go rather than keep it for the next burst.
const shrinkAbove = 1024

// queues is the table of this process's SKU queues, at most MaxLiveSKUs.
type queues struct {
	cfg Config
	obs Observer

	mu sync.Mutex // guards m, idle, every queue's waiting list, closing
	m  map[int64]*skuQueue
	// idle lists the queues whose workers wait with nothing queued, the
	// longest idle first: [0] those whose last batch sold nothing, [1] the
	// others. A full table evicts from them, in that order.
	idle    [2]idleList
	closing bool
	quit    chan struct{} // closed by close: idle workers exit at once
	// workers counts the queues' workers and the confirmations they wait
	// for (confirmThenAnswer).
	workers sync.WaitGroup
}

func newQueues(cfg Config, obs Observer) *queues {
	return &queues{cfg: cfg, obs: obs, m: map[int64]*skuQueue{}, quit: make(chan struct{})}
}

// add appends p to its SKU's queue. fresh says the queue was made for p:
// the caller starts its worker, already counted in workers. The caller
// has made sure the SKU exists.
func (qs *queues) add(p *pending) (q *skuQueue, fresh bool, err error) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closing {
		return nil, false, fmt.Errorf("%w: shutting down", service.ErrUnavailable)
	}
	q, ok := qs.m[p.req.SKUID]
	if !ok {
		if len(qs.m) >= qs.cfg.MaxLiveSKUs && !qs.evictIdle() {
			return nil, false, service.ErrTooManySKUs
		}
		q = &skuQueue{id: p.req.SKUID, wake: make(chan struct{}, 1), stop: make(chan struct{})}
		if qs.cfg.Replicas != nil {
			q.unconfirmed = make(chan struct{}, maxUnconfirmed)
		}
		qs.m[q.id] = q
		qs.workers.Add(1)
		fresh = true
	}
	if q.idle != nil {
		q.idle.remove(q)
	}
	if q.len() >= qs.cfg.QueueMax && !bumpYoungest(q, p) {
		qs.obs.QueueRejected(q.id)
		return q, fresh, service.ErrBusy
	}
	if len(q.waiting) == cap(q.waiting) && q.head > 0 { // reuse the taken front
		n := copy(q.waiting, q.waiting[q.head:])
		clear(q.waiting[n:])
		q.waiting, q.head = q.waiting[:n], 0
	}
	q.insert(p)
	q.arrivals.observe(time.Now().UnixNano())
	qs.obs.QueueDepth(q.id, q.len())
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return q, fresh, nil
}

// bumpYoungest makes room in q, full, for p when p arrived before the
// youngest buyer queued: that one is told busy instead (and keeps its
// place for its retry), so an older buyer never loses its place to a
// younger one. Called with queues.mu held.
func bumpYoungest(q *skuQueue, p *pending) bool {
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
	if y.req.Wait {
		q.waits--
	}
	if y.state.CompareAndSwap(queued, abandoned) { // else its buyer left
		y.done <- service.Outcome{Err: service.ErrBusy}
	}
	return true
}

// take moves the waiting requests of q that lim lets go (fair.go) into
// batch, oldest first, up to BatchMax in all.
func (qs *queues) take(q *skuQueue, batch []*pending, lim turnLimit) []*pending {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	n := max(min(q.len(), qs.cfg.BatchMax-len(batch)), 0)
	for n > 0 { // rare: a limit inside the batch
		a := q.waiting[q.head+n-1].arrived
		if a <= lim.until || (n <= lim.floor && a <= lim.line) {
			break
		}
		n--
	}
	if q.waits > 0 {
		for _, p := range q.waiting[q.head : q.head+n] {
			if p.req.Wait {
				q.waits--
			}
		}
	}
	batch = append(batch, q.waiting[q.head:q.head+n]...)
	clear(q.waiting[q.head : q.head+n])
	q.head += n
	if q.len() == 0 {
		q.waiting, q.head = q.waiting[:0], 0
		if cap(q.waiting) > shrinkAbove {
			q.waiting = nil
		}
	}
	if n > 0 {
		qs.obs.QueueDepth(q.id, q.len())
	}
	if len(batch) == 0 && q.len() == 0 { // the worker is about to wait
		qs.goIdle(q)
	}
	return batch
}

// oldest returns the arrival of q's oldest waiting buyer, noLimit when
// none waits.
func (qs *queues) oldest(q *skuQueue) int64 {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q.len() == 0 {
		return noLimit
	}
	return q.waiting[q.head].arrived
}

// waitersQueued reports whether a buyer queued for q asks to wait.
func (qs *queues) waitersQueued(q *skuQueue) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return q.waits > 0
}

// expected is how many more buyers of q are expected within d (linger.go).
func (qs *queues) expected(q *skuQueue, d time.Duration) int64 {
	now := time.Now().UnixNano()
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return q.arrivals.expectedWithin(now, d)
}

// idleIfEmpty reports whether q is empty, and lists it as idle when it
// is: its worker is about to wait, holding its lease or not.
func (qs *queues) idleIfEmpty(q *skuQueue) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q.len() > 0 {
		return false
	}
	qs.goIdle(q)
	return true
}

func (qs *queues) empty(q *skuQueue) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return q.len() == 0
}

// goIdle lists q, empty, as idle unless it is already or was evicted.
// Called with mu held.
func (qs *queues) goIdle(q *skuQueue) {
	if q.idle != nil || qs.m[q.id] != q {
		return
	}
	i := 0
	if q.sold {
		i = 1
	}
	qs.idle[i].push(q)
}

// evictIdle makes room in a full table: it removes the longest idle
// queue, preferring one whose last batch sold nothing, and stops its
// worker. It reports false when every queue has work. Called with mu held.
func (qs *queues) evictIdle() bool {
	for i := range qs.idle {
		if q := qs.idle[i].head; q != nil {
			qs.idle[i].remove(q)
			delete(qs.m, q.id)
			close(q.stop)
			return true
		}
	}
	return false
}

// retire removes an empty queue from the table so that its worker can
// exit; it reports false when a request arrived meanwhile.
func (qs *queues) retire(q *skuQueue) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q.len() > 0 {
		return false
	}
	if q.idle != nil {
		q.idle.remove(q)
	}
	if qs.m[q.id] == q {
		delete(qs.m, q.id)
	}
	return true
}

func (qs *queues) live() int {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return len(qs.m)
}

// close refuses every later order and tells idle workers to exit; it
// reports whether this call closed the table.
func (qs *queues) close() bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closing {
		return false
	}
	qs.closing = true
	close(qs.quit)
	return true
}

// idleList is a list of queues, linked through the queues themselves so
// that going idle allocates nothing. Guarded by queues.mu.
type idleList struct{ head, tail *skuQueue }

func (l *idleList) push(q *skuQueue) {
	q.idle, q.prev, q.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = q
	} else {
		l.head = q
	}
	l.tail = q
}

func (l *idleList) remove(q *skuQueue) {
	if q.prev != nil {
		q.prev.next = q.next
	} else {
		l.head = q.next
	}
	if q.next != nil {
		q.next.prev = q.prev
	} else {
		l.tail = q.prev
	}
	q.idle, q.prev, q.next = nil, nil, nil
}
