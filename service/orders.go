package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// OrdersConfig tunes the order path; see internal/config for the defaults.
type OrdersConfig struct {
	QueueMax       int           // waiting requests per SKU per process
	MaxLiveSKUs    int           // SKU queues (and workers) per process
	BatchMax       int           // requests per transaction
	Linger         time.Duration // longest wait for more orders before committing a small batch (linger.go); 0: never
	RequestTimeout time.Duration // how long a buyer may wait in the queue; then 503, uncharged
	TxTimeout      time.Duration // one batch: lock wait plus transaction
	LockWait       time.Duration // longest wait for the lock before selling without it
	LockTTL        time.Duration // the lease: after a LockWait timeout the SKU sells unlocked this long
	LockHold       time.Duration // a busy worker keeps its lock across batches this long; 0: one hold per batch
	LockHoldIdle   time.Duration // a worker whose queue emptied keeps its lock this long for the next order; 0: lets it go at once
	MaxRetries     int           // version conflicts tolerated per batch
	IdleTimeout    time.Duration // an idle SKU worker exits after this
	UnknownSKUTTL  time.Duration // how long an id found not to exist is answered 404 without a read
	SoldOutTTL     time.Duration // how often a SKU's shared sold-out mark is read
	SoldOutRecheck time.Duration // a local sold-out mark older than this is re-read from the database
	PaymentTimeout time.Duration // a new order awaits payment this long; 0: paid at creation
}

// Observer receives what the order path does, for metrics. Methods must
// be cheap and safe for concurrent use.
type Observer interface {
	OrderResult(result string)
	QueueDepth(skuID int64, depth int)
	QueueRejected(skuID int64)
	Batch(size int, commit time.Duration, retries int, err error)
	Degraded(on bool)
	SoldOutFastPath()
	// MarkUnpublished counts restocks whose shared mark could not be
	// written after retries.
	MarkUnpublished()
	// KnownRow counts a committed batch that brought the row its lease's
	// previous batch left (Batch.Known): decided on it without reading
	// (used), or read again because something had changed (a restock,
	// another writer, a repeat buyer, a replay).
	KnownRow(used bool)
}

type nopObserver struct{}

func (nopObserver) OrderResult(string)                   {}
func (nopObserver) QueueDepth(int64, int)                {}
func (nopObserver) QueueRejected(int64)                  {}
func (nopObserver) Batch(int, time.Duration, int, error) {}
func (nopObserver) Degraded(bool)                        {}
func (nopObserver) SoldOutFastPath()                     {}
func (nopObserver) MarkUnpublished()                     {}
func (nopObserver) KnownRow(bool)                        {}

// redisProbeInterval is how long the order path sells without the lock
// after Redis was found unreachable before it tries the lock again.
const redisProbeInterval = time.Second

// Orders is the order flow. It is safe for concurrent use; Shutdown stops it.
type Orders struct {
	store  Store
	locker Locker
	marks  SoldOutMarks
	skus   *skuDirectory
	cfg    OrdersConfig
	log    *slog.Logger
	obs    Observer

	mu     sync.Mutex // guards queues, idle, every queue's waiting list, closing
	queues map[int64]*skuQueue
	// idle lists the queues whose workers wait with nothing queued, the
	// longest idle first: [0] those whose last batch sold nothing, [1] the
	// others. A full table evicts from them, in that order.
	idle    [2]idleList
	closing bool
	quit    chan struct{} // closed by Shutdown: idle workers exit at once
	abort   atomic.Bool   // Shutdown ran out of time: answer, don't commit
	workers sync.WaitGroup

	lockSkip     sync.Map     // sku id → unix nanos until which its lock is not awaited
	lockDownTill atomic.Int64 // unix nanos until which the lock is skipped
	degraded     atomic.Bool
}

// NewOrders returns the order flow over store, locker and marks. obs may be nil.
func NewOrders(store Store, locker Locker, marks SoldOutMarks, cfg OrdersConfig, log *slog.Logger, obs Observer) *Orders {
	if obs == nil {
		obs = nopObserver{}
	}
	return &Orders{
		store: store, locker: locker, marks: marks, cfg: cfg, log: log, obs: obs,
		skus:   newSKUDirectory(store, cfg.UnknownSKUTTL, cfg.TxTimeout),
		queues: map[int64]*skuQueue{},
		quit:   make(chan struct{}),
	}
}

// Degraded reports whether the last attempt to take a lock found Redis
// unreachable, so that orders are sold on the database's guard alone.
func (o *Orders) Degraded() bool { return o.degraded.Load() }

// pending is one buyer waiting for its answer.
type pending struct {
	req     OrderRequest
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
	waiting  []*pending // guarded by Orders.mu; waiting[head:] is the queue
	head     int
	wake     chan struct{} // capacity 1: "something was queued"
	stop     chan struct{} // closed when evicted: its worker exits
	arrivals arrivals      // guarded by Orders.mu

	idle       *idleList // the list q is on, if any; guarded by Orders.mu
	prev, next *skuQueue // on idle
	sold       bool      // its last batch created an order; the worker's own
}

func (q *skuQueue) len() int { return len(q.waiting) - q.head }

// shrinkAbove is the capacity above which an emptied queue lets its
// array go rather than keep it for the next burst.
const shrinkAbove = 1024

// Place sells r or says why not. A request whose ctx ends while it waits
// is not charged; one already in a committing batch gets that batch's answer.
func (o *Orders) Place(ctx context.Context, r OrderRequest) (placed Placed, err error) {
	defer func() { o.obs.OrderResult(ResultOf(err, placed.Created)) }()
	if err := r.Validate(); err != nil {
		return Placed{}, err
	}
	sku, err := o.skus.lookup(ctx, r.SKUID)
	if err != nil {
		return Placed{}, err
	}
	soldOut, err := o.isSoldOut(ctx, sku)
	if err != nil {
		return Placed{}, err
	}
	if soldOut {
		return o.refuseUnlocked(ctx, r, ErrSoldOut)
	}
	if closed, err := o.saleClosed(ctx, sku); err != nil || closed {
		if err != nil {
			return Placed{}, err
		}
		return o.refuseUnlocked(ctx, r, ErrSaleNotActive)
	}
	p := &pending{req: r, done: make(chan Outcome, 1)}
	// No timer per request: the worker refuses, uncharged, whoever it
	// reaches after their deadline; ctx still ends the wait of a buyer who left.
	p.expires = time.Now().Add(o.cfg.RequestTimeout).UnixNano()
	if err := o.enqueue(p); err != nil {
		return Placed{}, err
	}
	select {
	case out := <-p.done:
		return out.Placed, out.Err
	case <-ctx.Done():
		if p.state.CompareAndSwap(queued, abandoned) {
			return Placed{}, fmt.Errorf("%w: gave up waiting: %w", ErrUnavailable, ctx.Err())
		}
		// The worker took it: its batch answers within TxTimeout.
		out := <-p.done
		return out.Placed, out.Err
	}
}

// refuseUnlocked answers a buyer of a sold-out SKU, or of one whose sale
// is not on, with refusal without a transaction or a queue; a retry of a
// committed order still finds it, even after the sale.
func (o *Orders) refuseUnlocked(ctx context.Context, r OrderRequest, refusal error) (Placed, error) {
	if r.IdempotencyKey != "" {
		ord, err := o.store.OrderByKey(ctx, r.UserID, r.IdempotencyKey)
		switch {
		case err == nil && !ord.Same(r):
			return Placed{}, ErrIdempotencyConflict
		case err == nil:
			return Placed{Order: ord}, nil
		case !errors.Is(err, ErrNotFound):
			return Placed{}, err
		}
	}
	if refusal == ErrSoldOut {
		o.obs.SoldOutFastPath()
	}
	return Placed{}, refusal
}

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
		o.queues[q.id] = q
		o.workers.Add(1)
		go o.work(q)
	}
	if q.idle != nil {
		q.idle.remove(q)
	}
	if q.len() >= o.cfg.QueueMax {
		o.obs.QueueRejected(q.id)
		return ErrBusy
	}
	if len(q.waiting) == cap(q.waiting) && q.head > 0 { // reuse the taken front
		n := copy(q.waiting, q.waiting[q.head:])
		clear(q.waiting[n:])
		q.waiting, q.head = q.waiting[:n], 0
	}
	q.waiting = append(q.waiting, p)
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

// take moves waiting requests of q into batch, up to BatchMax in all.
func (o *Orders) take(q *skuQueue, batch []*pending) []*pending {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := max(min(q.len(), o.cfg.BatchMax-len(batch)), 0)
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
	if len(batch) == 0 && q.idle == nil && o.queues[q.id] == q { // the worker is about to wait
		i := 0
		if q.sold {
			i = 1
		}
		o.idle[i].push(q)
	}
	return batch
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

// work is the one worker of a SKU in this process. It exits when its queue
// stayed empty for IdleTimeout, or at once when Shutdown finds it empty.
func (o *Orders) work(q *skuQueue) {
	defer o.workers.Done()
	hold := &leaseHold{o: o, sku: q.id, max: o.cfg.LockHold}
	defer hold.release()
	idle := time.NewTimer(o.cfg.IdleTimeout)
	defer idle.Stop()
	lingering := time.NewTimer(time.Hour)
	lingering.Stop()
	batch := make([]*pending, 0, min(o.cfg.BatchMax, 64))
	for {
		batch = o.take(q, batch[:0]) // queued work first, also while shutting down
		if len(batch) == 0 {
			select {
			case <-q.wake:
				continue
			case <-idle.C:
			case <-o.quit:
			case <-q.stop: // evicted: out of the table, nothing queued
				return
			}
			if o.retire(q) {
				return
			}
			idle.Reset(o.cfg.IdleTimeout)
			continue
		}
		batch = o.linger(q, batch, lingering)
		q.sold = o.commit(context.Background(), q.id, batch, hold)
		if !o.awaitHolding(q, hold, lingering) {
			hold.release() // idle: the lock is for whoever needs it next
		}
		clear(batch)
		idle.Reset(o.cfg.IdleTimeout)
	}
}

// awaitHolding reports whether q has orders for the worker, waiting for
// the next one while it holds its lease, for LockHoldIdle at most: a
// moderately busy SKU (its next order some milliseconds away) then keeps
// its lease, its fence and its known row from batch to batch, sparing each
// batch two Redis round trips and its reads. The wait ends, and the lease
// goes, as soon as someone else is found to want it; a lease that cannot
// say so is kept past each LockHold only if Keep finds nobody waiting.
// Shutdown and a lost lease end the wait too.
func (o *Orders) awaitHolding(q *skuQueue, hold *leaseHold, t *time.Timer) bool {
	if !o.queueEmpty(q) {
		return true
	}
	if hold.lease == nil || o.cfg.LockHoldIdle <= 0 || hold.max <= 0 { // max 0: one hold per batch
		return false
	}
	wanting := hold.wanting()
	deadline := time.Now().Add(o.cfg.LockHoldIdle)
	defer t.Stop()
	for {
		wait := time.Until(deadline)
		if wanting == nil {
			wait = min(wait, hold.max-time.Since(hold.since))
		}
		if wait <= 0 {
			if time.Until(deadline) <= 0 || !hold.keep() {
				return false
			}
			continue
		}
		t.Reset(wait)
		select {
		case <-q.wake: // may be left by orders this worker already took
			if !o.queueEmpty(q) {
				return true
			}
		case <-t.C:
		case <-wanting: // nil (never ready) when the lease cannot say
			return false
		case <-o.quit:
			return false
		case <-hold.lease.Lost():
			return false
		}
	}
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

// commit answers every request of batch (all for one SKU), in the steps
// of the order path: admit the buyers still waiting, refuse them all
// when the answer needs no transaction, commit under the SKU's lock,
// answer, and publish a sell-out. It reports whether the batch created
// an order.
func (o *Orders) commit(parent context.Context, skuID int64, batch []*pending, hold *leaseHold) (sold bool) {
	live := o.admit(batch)
	if len(live) == 0 || o.refuseAll(skuID, live) {
		return false
	}
	ctx, cancel := context.WithTimeout(parent, o.cfg.TxTimeout)
	defer cancel()
	begun := time.Now().UnixNano()
	res, err := o.commitLocked(ctx, o.batchOf(skuID, live), hold)
	if err != nil {
		o.fail(skuID, live, err)
		return false
	}
	for i, out := range res.Outcomes {
		sold = sold || out.Placed.Created
		live[i].done <- out
	}
	if res.SKU.Stock == 0 {
		o.markSoldOut(skuID, res.SKU.Version, begun)
	}
	return sold
}

// admit takes the requests whose buyers still wait and are within their
// deadline; the late are answered, uncharged.
func (o *Orders) admit(batch []*pending) []*pending {
	live := batch[:0:0]
	now := time.Now().UnixNano()
	for _, p := range batch {
		if p.state.Load() != taken && !p.state.CompareAndSwap(queued, taken) {
			continue // its buyer left
		}
		if p.expires != 0 && now > p.expires {
			p.done <- Outcome{Err: fmt.Errorf("%w: waited past order.request_timeout", ErrUnavailable)}
			continue
		}
		live = append(live, p)
	}
	return live
}

// refuseAll answers the whole batch without a transaction when Shutdown
// ran out of time, or when the SKU is known sold out and no buyer may be
// a replay of an earlier order.
func (o *Orders) refuseAll(skuID int64, live []*pending) bool {
	var err error
	switch {
	case o.abort.Load():
		err = fmt.Errorf("%w: shutting down", ErrUnavailable)
	case o.localSoldOut(skuID) && !anyKeyed(live):
		err = ErrSoldOut
	default:
		return false
	}
	for _, p := range live {
		if err == ErrSoldOut {
			o.obs.SoldOutFastPath()
		}
		p.done <- Outcome{Err: err}
	}
	return true
}

func (o *Orders) batchOf(skuID int64, live []*pending) Batch {
	b := Batch{SKUID: skuID, Requests: make([]OrderRequest, len(live)), Shared: true,
		PaymentTimeout: o.cfg.PaymentTimeout}
	for i, p := range live {
		b.Requests[i] = p.req
	}
	return b
}

// maxStaleFences bounds how often one batch re-obtains the lock after
// the database refused its fence.
const maxStaleFences = 3

// commitLocked commits b under the SKU's lock when one can be had. A
// stale fence means another holder took the lock since ours was
// obtained: the lease is dropped at once, never used again, and a new one
// obtained after a jittered pause, a bounded number of times.
func (o *Orders) commitLocked(ctx context.Context, b Batch, hold *leaseHold) (BatchResult, error) {
	for stale := 0; ; stale++ {
		lease := hold.acquire(ctx)
		b.Known = hold.known
		res, err := o.commitUnder(ctx, b, lease)
		if lease != nil && o.adoptForeignFence(ctx, lease, err) {
			res, err = o.commitUnder(ctx, b, lease)
		}
		if err != nil {
			// A lease that failed a batch (lost, stale, expired) never
			// serves another: the next attempt obtains afresh.
			hold.release()
		} else if lease != nil {
			hold.known = &res.SKU
		}
		if !errors.Is(err, ErrStaleFence) {
			return res, err
		}
		if stale+1 >= maxStaleFences || ctx.Err() != nil {
			return res, fmt.Errorf("%w: the sku's lock kept moving to other holders: %w", ErrUnavailable, err)
		}
		o.log.Warn("stale fence: the lock moved to another holder; obtaining it again", "sku", b.SKUID, "fence", b.Fence)
		backoff(ctx, stale+2)
	}
}

// commitUnder runs b's transaction with lease's fence (none without a
// lease), retrying version conflicts a bounded number of times. Losing
// the lease meanwhile cancels the transaction.
func (o *Orders) commitUnder(ctx context.Context, b Batch, lease Lease) (BatchResult, error) {
	b.Fence = 0
	// A batch sold without the lock commits in a transaction of its own:
	// it is the one likely to meet another instance's holder on its row (a
	// row-lock wait, a version conflict), which in a shared round would
	// hold up or fail the other SKUs' batches with it.
	b.Shared = b.Shared && lease != nil
	if lease != nil {
		b.Fence = lease.Fence()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := o.cancelOnLoss(lease, b.SKUID, cancel)
		defer stop()
	}
	start := time.Now()
	var (
		res     BatchResult
		err     error
		retries int
	)
	for {
		b.Now = time.Now().UTC().Truncate(time.Microsecond) // what the database keeps
		res, err = o.store.CommitBatch(ctx, b)
		if !errors.Is(err, ErrConflict) || retries >= o.cfg.MaxRetries || ctx.Err() != nil {
			break
		}
		retries++
		b.Known = nil // the row moved: read it
		if lease == nil {
			backoff(ctx, retries) // unlocked contenders: spread the retries out
		}
	}
	o.obs.Batch(len(b.Requests), time.Since(start), retries, err)
	if err == nil && b.Known != nil {
		o.obs.KnownRow(res.ReadsSkipped)
	}
	return res, err
}

// cancelOnLoss calls cancel if lease is found lost before stop is called.
func (o *Orders) cancelOnLoss(lease Lease, skuID int64, cancel context.CancelFunc) (stop func()) {
	lost := lease.Lost()
	if lost == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-lost:
			o.log.Warn("lock lease lost during a batch; aborting it", "sku", skuID)
			cancel()
		case <-done:
		}
	}()
	return func() { close(done) }
}

// fail answers every buyer of a failed batch with a true answer: the
// batch committed nothing (or, for ErrOutcomeUnknown, nobody knows).
func (o *Orders) fail(skuID int64, live []*pending, err error) {
	switch {
	case errors.Is(err, ErrSKUNotFound):
		o.skus.forget(skuID) // the database no longer has it
	case errors.Is(err, ErrConflict):
		err = fmt.Errorf("%w: too much contention on sku %d: %w", ErrUnavailable, skuID, err)
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrOutcomeUnknown):
	default:
		o.log.Error("order batch failed", "sku", skuID, "size", len(live), "err", err)
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for _, p := range live {
		p.done <- Outcome{Err: err}
	}
}

func anyKeyed(ps []*pending) bool {
	for _, p := range ps {
		if p.req.IdempotencyKey != "" {
			return true
		}
	}
	return false
}

// obtain takes the SKU's lock, or returns nil to sell without it: when
// Redis is unreachable (degraded mode); when the lock stayed held for a
// whole LockWait by a holder that showed no sign of life (likely dead: its
// lease is not waited for again until it has surely run out); or when live
// holders kept it busy for half the batch's time. A lock that is renewed or
// passes from holder to holder while this worker waits is busy, not stuck:
// selling beside its holders would only make their transactions and this
// one conflict, and fail the shared rounds of other SKUs, whose locks are
// held meanwhile (docs/locking.md, "Busy is not dead"). Either way the
// version column keeps the sale correct.
func (o *Orders) obtain(ctx context.Context, skuID int64) Lease {
	now := time.Now().UnixNano()
	if now < o.lockDownTill.Load() {
		return nil
	}
	if until, ok := o.lockSkip.Load(skuID); ok {
		if now < until.(int64) {
			return nil
		}
		o.lockSkip.Delete(skuID)
	}
	key := "sku:" + strconv.FormatInt(skuID, 10)
	busy, cancelBusy := context.WithTimeout(ctx, max(o.cfg.TxTimeout/2, o.cfg.LockWait))
	defer cancelBusy()
	for {
		lctx, cancel := context.WithTimeout(busy, o.cfg.LockWait)
		lease, err := o.locker.Obtain(lctx, key)
		cancel()
		switch {
		case err == nil:
			if o.degraded.CompareAndSwap(true, false) {
				o.log.Info("lock store reachable again: selling under the lock")
				o.obs.Degraded(false)
			}
			return lease
		case errors.Is(err, ErrLockUnavailable):
			o.lockDownTill.Store(time.Now().Add(redisProbeInterval).UnixNano())
			if o.degraded.CompareAndSwap(false, true) {
				o.log.Warn("lock store (redis or zookeeper) unreachable: selling on the database guard alone (degraded)", "err", err)
				o.obs.Degraded(true)
			}
			return nil
		case busy.Err() == nil && errors.Is(lctx.Err(), context.DeadlineExceeded) && errors.Is(err, ErrLockBusy):
			continue // a whole LockWait of live holders: our turn comes
		case busy.Err() != nil || errors.Is(err, ErrLockBusy):
			// The last wait may have been cut short: nothing says the
			// holder died, so its lease is not skipped.
			o.log.Warn("lock busy with live holders for half the batch's time; selling this batch on the database guard alone", "sku", skuID, "err", err)
			return nil
		default:
			// Held for all of LockWait with no sign of life: its holder is
			// likely dead or stuck. Do not wait for it again until its
			// lease has surely run out.
			o.lockSkip.Store(skuID, time.Now().Add(o.cfg.LockTTL).UnixNano())
			o.log.Warn("lock held too long; selling on the database guard alone until its lease runs out", "sku", skuID, "err", err)
			return nil
		}
	}
}

// backoff waits a jittered, exponentially growing pause, or until ctx ends.
func backoff(ctx context.Context, attempt int) {
	ceiling := time.Millisecond << min(attempt, 6)
	t := time.NewTimer(rand.N(ceiling) + 100*time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Order returns the order with the given id.
func (o *Orders) Order(ctx context.Context, id int64) (Order, error) {
	return o.store.Order(ctx, id)
}

// SKU returns the SKU with the given id.
func (o *Orders) SKU(ctx context.Context, id int64) (SKU, error) {
	return o.store.SKU(ctx, id)
}

// Shutdown stops taking orders and drains what is queued. When ctx ends
// first, the requests still queued are answered ErrUnavailable, uncharged.
func (o *Orders) Shutdown(ctx context.Context) error {
	o.mu.Lock()
	if !o.closing {
		o.closing = true
		close(o.quit)
	}
	o.mu.Unlock()
	done := make(chan struct{})
	go func() {
		o.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		o.abort.Store(true)
		<-done // every batch in flight is bounded by TxTimeout
		return ctx.Err()
	}
}

// leaseHold is a SKU's lock as its worker holds it. A busy worker keeps it
// across consecutive batches, sparing two Redis round trips a batch: past
// max, for as long as nobody else wants it (heard without a round trip
// through the lock's wanted notices, else asked with one Keep per max),
// and then it lets it go so that other instances get their turn; the
// fence stays valid across the hold, since the database accepts a fence
// equal to the last one it saw. While it holds the lock, no other holder
// writes the SKU, so the row as its last batch left it (known) is most
// likely still the row: the next batch brings it (Batch.Known) and spares
// the transaction its reads. Another writer (a restock, an expiry) costs
// that batch one round trip.
type leaseHold struct {
	o     *Orders
	sku   int64
	max   time.Duration
	lease Lease
	since time.Time
	known *SKU // the SKU after this lease's last batch; nil before its first
}

// acquire returns the held lease, or obtains one (nil: sell unlocked).
func (h *leaseHold) acquire(ctx context.Context) Lease {
	if h.lease != nil {
		lost := false
		select {
		case <-h.lease.Lost(): // a nil channel (no watchdog) is never ready
			lost = true
		default:
		}
		switch {
		case lost:
			h.release()
		case time.Since(h.since) >= h.max && !h.unwanted():
			h.keep()
		}
	}
	if h.lease == nil {
		h.lease = h.o.obtain(ctx, h.sku)
		h.since = time.Now()
		h.known = nil
	}
	return h.lease
}

// wanter is a Lease that says when someone else wants its key
// (lock.Lock.Wanting): its channel is closed then, and nil when the lease
// cannot tell.
type wanter interface {
	Wanting() <-chan struct{}
}

func (h *leaseHold) wanting() <-chan struct{} {
	if w, ok := h.lease.(wanter); ok {
		return w.Wanting()
	}
	return nil
}

// unwanted reports whether the lease is known to be wanted by nobody else:
// then the worker holds on past max without a round trip.
func (h *leaseHold) unwanted() bool {
	w := h.wanting()
	if w == nil || h.max <= 0 {
		return false
	}
	select {
	case <-w:
		return false
	default:
		return true
	}
}

// keeper is a Lease that can be kept past LockHold when nobody else wants
// it (lock.Lock.Keep): one round trip instead of a release and an obtain.
type keeper interface {
	Keep(ctx context.Context) (bool, error)
}

// keep starts another LockHold with the held lease if no other holder
// waits for it, and else lets it go; it reports whether it is still held.
// A lease that cannot be kept this way (ZooKeeper), and every lease when
// max is 0 (one hold per batch), is let go.
func (h *leaseHold) keep() bool {
	k, ok := h.lease.(keeper)
	if !ok || h.max <= 0 {
		h.release()
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	kept, err := k.Keep(ctx)
	if kept {
		h.since = time.Now()
		return true
	}
	if err != nil {
		h.o.log.Warn("lock release failed", "sku", h.sku, "err", err)
	}
	h.lease, h.known = nil, nil // Keep let it go
	return false
}

// release lets the lease go, if one is held.
func (h *leaseHold) release() {
	h.known = nil
	if h.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := h.lease.Release(ctx); err != nil {
		h.o.log.Warn("lock release failed", "sku", h.sku, "err", err)
	}
	h.lease = nil
}
