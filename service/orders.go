package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// OrdersConfig tunes the order path; see internal/config for the defaults.
type OrdersConfig struct {
	QueueMax       int           // waiting requests per SKU per process
	MaxLiveSKUs    int           // SKU queues (and workers) per process
	BatchMax       int           // requests per transaction
	Linger         time.Duration // longest wait for more orders, or other SKUs' batches, before committing (linger.go, rounds.go); 0: never
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
	// FairWindow is how much younger than the oldest buyer waiting on
	// another instance a lock holder's buyers may be and still be sold
	// (fair.go).
	FairWindow time.Duration
	PlaceGrace time.Duration // a buyer told to come back keeps its arrival this long past Retry-After (places.go)
	PlacesMax  int           // places remembered per process; 0: none
	// Replicas, when set, confirms every batch's commit before its buyers
	// are answered (mysql.min_replicas); nil: answered at COMMIT.
	Replicas Replicas
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
	// Unconfirmed counts orders committed but not confirmed by the
	// replicas in time: their buyers were answered outcome_unknown.
	Unconfirmed(orders int)
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
func (nopObserver) Unconfirmed(int)                      {}

// Orders is the order flow. It is safe for concurrent use; Shutdown stops it.
type Orders struct {
	store  Store
	locker Locker
	marks  SoldOutMarks
	skus   *skuDirectory
	group  *groupCommit // the rounds that batches under a lock share
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

	places *places // the first arrivals of buyers told to come back

	lockSkip     sync.Map     // sku id → unix nanos until which its lock is not awaited
	lockDownTill atomic.Int64 // unix nanos until which the lock is skipped
	degraded     atomic.Bool
}

// NewOrders returns the order flow over store, locker and marks. obs may be nil.
func NewOrders(store Store, locker Locker, marks SoldOutMarks, cfg OrdersConfig, log *slog.Logger, obs Observer) *Orders {
	if obs == nil {
		obs = nopObserver{}
	}
	o := &Orders{
		store: store, locker: locker, marks: marks, cfg: cfg, log: log, obs: obs,
		skus:   newSKUDirectory(store, cfg.UnknownSKUTTL, cfg.TxTimeout),
		group:  newGroupCommit(store, cfg.Linger),
		queues: map[int64]*skuQueue{},
		quit:   make(chan struct{}),
	}
	board, _ := marks.(PlaceBoard)
	o.places = newPlaces(cfg.PlacesMax, comeBackAfter+cfg.PlaceGrace, board, log)
	return o
}

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
	p := &pending{req: r, arrived: o.places.arrival(r), done: make(chan Outcome, 1)}
	// No timer per request: the worker refuses, uncharged, whoever it
	// reaches after their deadline; ctx still ends the wait of a buyer who left.
	p.expires = time.Now().Add(o.cfg.RequestTimeout).UnixNano()
	if err := o.enqueue(p); err != nil {
		o.places.comeBack(r, p.arrived, err)
		return Placed{}, err
	}
	select {
	case out := <-p.done:
		o.places.comeBack(r, p.arrived, out.Err)
		return out.Placed, out.Err
	case <-ctx.Done():
		if p.state.CompareAndSwap(queued, abandoned) {
			return Placed{}, fmt.Errorf("%w: gave up waiting: %w", ErrUnavailable, ctx.Err())
		}
		// The worker took it, or bumped it: its answer comes within TxTimeout.
		out := <-p.done
		o.places.comeBack(r, p.arrived, out.Err)
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
		defer o.places.close()
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
