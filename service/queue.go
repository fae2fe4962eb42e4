package service

import (
	"fmt"
	"sync/atomic"
	"time"
)

// pending is one buyer waiting for its answer.
type pending struct {
	req     OrderRequest
	arrived int64        // unix µs: its arrival here, or its first, kept (fair.go)
	expires int64        // unix nanos; 0: no deadline of the queue's
	state   atomic.Int32 // queued → taken by the worker, or queued → abandoned
	done    chan Outcome // buffered: the worker never blocks on it
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
	waiting  []*pending // guarded by Orders.mu; waiting[head:] is the queue, by arrival
	head     int
	wake     chan struct{} // capacity 1: "something was queued"
	stop     chan struct{} // closed when evicted: its worker exits
	arrivals arrivals      // guarded by Orders.mu

	idle       *idleList // the list q is on, if any; guarded by Orders.mu
	prev, next *skuQueue // on idle
	sold       bool      // its last batch created an order; the worker's own
	// unconfirmed holds a token per committed batch awaiting its
	// replicas' confirmation (confirmThenAnswer).
	unconfirmed chan struct{}
}

func (q *skuQueue) len() int { return len(q.waiting) - q.head }

// shrinkAbove is the capacity above which an emptied queue lets its
// array go rather than keep it for the next burst.
const shrinkAbove = 1024

// enqueue adds p to its SKU's queue, starting the SKU's worker if none
// runs. The caller has made sure the SKU exists.
func (o *Orders) enqueue(p *pending) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return fmt.Errorf("%w: shutting down", ErrUnavailable)
	}
	q, ok := o.queues[p.req.SKUID]
	if !ok {
		if len(o.queues) >= o.cfg.MaxLiveSKUs && !o.evictIdle() {
			return ErrTooManySKUs
		}
		q = &skuQueue{id: p.req.SKUID, wake: make(chan struct{}, 1), stop: make(chan struct{})}
		if o.cfg.Replicas != nil {
			q.unconfirmed = make(chan struct{}, maxUnconfirmed)
		}
		o.queues[q.id] = q
		o.workers.Add(1)
		go o.work(q)
	}
	if q.idle != nil {
		q.idle.remove(q)
	}
	if q.len() >= o.cfg.QueueMax && !o.bumpYoungest(q, p) {
		o.obs.QueueRejected(q.id)
		return ErrBusy
	}
	if len(q.waiting) == cap(q.waiting) && q.head > 0 { // reuse the taken front
		n := copy(q.waiting, q.waiting[q.head:])
		clear(q.waiting[n:])
		q.waiting, q.head = q.waiting[:n], 0
	}
	q.insert(p)
	q.arrivals.observe(time.Now().UnixNano())
	o.obs.QueueDepth(q.id, q.len())
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// idleList is a list of queues, linked through the queues themselves so
// that going idle allocates nothing. Guarded by Orders.mu.
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

// take moves the waiting requests of q that lim lets go (fair.go) into
// batch, oldest first, up to BatchMax in all.
func (o *Orders) take(q *skuQueue, batch []*pending, lim turnLimit) []*pending {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := max(min(q.len(), o.cfg.BatchMax-len(batch)), 0)
	for n > 0 { // rare: a limit inside the batch
		a := q.waiting[q.head+n-1].arrived
		if a <= lim.until || (n <= lim.floor && a <= lim.line) {
			break
		}
		n--
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
		o.obs.QueueDepth(q.id, q.len())
	}
	if len(batch) == 0 && q.len() == 0 { // the worker is about to wait
		o.goIdle(q)
	}
	return batch
}

// idleIfEmpty reports whether q is empty, and lists it as idle when it is:
// its worker is about to wait, holding its lease or not.
func (o *Orders) idleIfEmpty(q *skuQueue) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if q.len() > 0 {
		return false
	}
	o.goIdle(q)
	return true
}

// goIdle lists q, empty, as idle unless it is already or was evicted.
// Called with o.mu held.
func (o *Orders) goIdle(q *skuQueue) {
	if q.idle != nil || o.queues[q.id] != q {
		return
	}
	i := 0
	if q.sold {
		i = 1
	}
	o.idle[i].push(q)
}

// evictIdle makes room in a full table: it removes the longest idle
// queue, preferring one whose last batch sold nothing, and stops its
// worker. It reports false when every queue has work.
func (o *Orders) evictIdle() bool {
	for i := range o.idle {
		if q := o.idle[i].head; q != nil {
			o.idle[i].remove(q)
			delete(o.queues, q.id)
			close(q.stop)
			return true
		}
	}
	return false
}

// LiveQueues returns the number of SKU queues (each with its worker) in
// this process.
func (o *Orders) LiveQueues() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.queues)
}

func (o *Orders) queueEmpty(q *skuQueue) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return q.len() == 0
}

// retire removes an empty queue from the map so that its worker can exit;
// it reports false when a request arrived meanwhile.
func (o *Orders) retire(q *skuQueue) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if q.len() > 0 {
		return false
	}
	if q.idle != nil {
		q.idle.remove(q)
	}
	if o.queues[q.id] == q {
		delete(o.queues, q.id)
	}
	return true
}
