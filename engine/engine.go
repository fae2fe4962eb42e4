// Package engine sells the orders the domain admits (service.Seller): a
// bounded queue and one worker per live SKU, batches taken in arrival
// order, the SKU's lock held across batches and handed over by rank
// (fair selling), the group commit that lets batches of several SKUs
// share a transaction, and the replicas' confirmation before an answer.
// Who gets stock is decided by the domain's rules (service.Allocate), run
// by the Committer inside each transaction. The engine declares the ports
// it calls (ports.go): the Committer, the SKUs, the Locker and its Lease,
// the Replicas; the places' board (places.go).
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/service"
)

// Config tunes the engine; see internal/config for the defaults.
type Config struct {
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
	PaymentTimeout time.Duration // a new order awaits payment this long; 0: paid at creation
	// FairWindow is how much younger than the oldest buyer waiting on
	// another instance a lock holder's buyers may be and still be sold
	// (fair.go).
	FairWindow time.Duration
	PlaceGrace time.Duration // a buyer told to come back keeps its arrival this long past Retry-After (places.go)
	PlacesMax  int           // places remembered per process; 0: none
	// WaitlistMax bounds each SKU's waiting orders (service.Batch).
	WaitlistMax int64
	// Replicas, when set, confirms every batch's commit before its buyers
	// are answered (mysql.min_replicas); nil: answered at COMMIT.
	Replicas Replicas
	// Tracer, when set, records the steps of traced orders (trace.go);
	// nil: nothing is measured for tracing.
	Tracer Tracer
}

// Observer receives what the engine does, for metrics. Methods must be
// cheap and safe for concurrent use.
type Observer interface {
	QueueDepth(skuID int64, depth int)
	QueueRejected(skuID int64)
	Batch(size int, commit time.Duration, retries int, err error)
	Degraded(on bool)
	// SoldOutFastPath counts a queued buyer refused sold out without a
	// transaction.
	SoldOutFastPath()
	// KnownRow counts a committed batch that brought the row its lease's
	// previous batch left (Batch.Known): decided on it without reading
	// (used), or read again because something had changed (a restock,
	// another writer, a repeat buyer, a replay).
	KnownRow(used bool)
	// Unconfirmed counts orders committed but not confirmed by the
	// replicas in time: their buyers were answered outcome_unknown.
	Unconfirmed(orders int)
	// SoldUnlocked counts order requests decided in a batch sold without
	// the SKU's lock while it had stock or buyers asked to wait (the
	// obtain timed out or failed, or the lock store is unreachable): the
	// database's guard holds for them, first come, first served across
	// instances does not (docs/design.md, invariants 19 and 20).
	SoldUnlocked(orders int)
	// Waiters records a SKU's waiting orders as a batch that has or made
	// some left its row.
	Waiters(skuID, n int64)
}

type nopObserver struct{}

func (nopObserver) QueueDepth(int64, int)                {}
func (nopObserver) QueueRejected(int64)                  {}
func (nopObserver) Batch(int, time.Duration, int, error) {}
func (nopObserver) Degraded(bool)                        {}
func (nopObserver) SoldOutFastPath()                     {}
func (nopObserver) KnownRow(bool)                        {}
func (nopObserver) Unconfirmed(int)                      {}
func (nopObserver) SoldUnlocked(int)                     {}
func (nopObserver) Waiters(int64, int64)                 {}

var _ service.Seller = (*Seller)(nil)

// Seller is the engine. It is safe for concurrent use; Shutdown stops it.
type Seller struct {
	cfg    Config
	log    *slog.Logger
	obs    Observer
	store  Committer
	skus   SKUs // whether a SKU is known sold out; told of a sell-out
	queues *queues
	locks  *locks       // the lock policy: obtain, or sell on the database guard
	rounds *groupCommit // the transactions that batches under a lock share
	places *places      // the first arrivals of buyers told to come back
	abort  atomic.Bool  // Shutdown ran out of time: answer, don't commit
}

// New returns the engine committing through store, under locker's leases. skus says which SKUs are
// known sold out and learns of each sell-out; board, if not nil, shares
// the places of buyers told to come back with the other instances. obs
// may be nil.
func New(store Committer, locker Locker, skus SKUs, board PlaceBoard, cfg Config, log *slog.Logger, obs Observer) *Seller {
	if obs == nil {
		obs = nopObserver{}
	}
	return &Seller{
		cfg: cfg, log: log, obs: obs, store: store, skus: skus,
		queues: newQueues(cfg, obs),
		locks:  &locks{locker: locker, cfg: cfg, log: log, obs: obs},
		rounds: newGroupCommit(store, cfg.Linger, cfg.Tracer),
		places: newPlaces(cfg.PlacesMax, comeBackAfter+cfg.PlaceGrace, board, log),
	}
}

// Sell queues r behind the SKU's earlier buyers and waits for its batch's
// answer, as service.Seller says.
func (s *Seller) Sell(ctx context.Context, r service.OrderRequest) (service.Placed, error) {
	p := &pending{req: r, arrived: s.places.arrival(r), done: make(chan service.Outcome, 1)}
	if s.cfg.Tracer != nil {
		p.trace = s.traceOrder(s.cfg.Tracer.Order(ctx))
	}
	// No timer per request: the worker refuses, uncharged, whoever it
	// reaches after their deadline; ctx still ends the wait of a buyer who left.
	p.expires = time.Now().Add(s.cfg.RequestTimeout).UnixNano()
	q, fresh, err := s.queues.add(p)
	if fresh {
		go s.work(q)
	}
	if err != nil {
		s.places.comeBack(r, p.arrived, err)
		return service.Placed{}, err
	}
	var out service.Outcome
	select {
	case out = <-p.done:
	case <-ctx.Done():
		if p.state.CompareAndSwap(queued, abandoned) {
			return service.Placed{}, fmt.Errorf("%w: gave up waiting: %w", service.ErrUnavailable, ctx.Err())
		}
		out = <-p.done // the worker took it, or bumped it: its answer comes within TxTimeout
	}
	s.places.comeBack(r, p.arrived, out.Err)
	return out.Placed, out.Err
}

// Degraded reports whether the last attempt to take a lock found the lock
// store unreachable, so that orders are sold on the database's guard alone.
func (s *Seller) Degraded() bool { return s.locks.degraded.Load() }

// LiveQueues returns the number of SKU queues (each with its worker) in
// this process.
func (s *Seller) LiveQueues() int { return s.queues.live() }

// Shutdown stops taking orders and drains what is queued. When ctx ends
// first, the requests still queued are answered ErrUnavailable, uncharged.
func (s *Seller) Shutdown(ctx context.Context) error {
	if s.queues.close() {
		defer s.places.close()
	}
	done := make(chan struct{})
	go func() {
		s.queues.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.abort.Store(true)
		<-done // every batch in flight is bounded by TxTimeout
		return ctx.Err()
	}
}
