// Package compare holds the order designs `make bench` measures the
// service against: the ones people usually write, each committing one
// order per transaction with no per-SKU queue and no sold-out fast path.
// They run their own SQL on the service's schema, behind their own HTTP
// server (cmd/compare), so none of them is in the service's binary. The
// database's guards (the conditional UPDATE, the CHECK constraints) keep
// every design from overselling; they are only slower.
package compare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// Design names one way of reaching the database.
type Design string

// The designs.
const (
	// PerRequest takes the SKU's Redis lock for every request, through a
	// fresh lock client each time (no local queue lines the waiters up:
	// every one polls Redis with back-off), and commits under its fence.
	PerRequest Design = "per-request"
	// Conditional uses no lock: one UPDATE ... WHERE stock >= n per order.
	Conditional Design = "conditional"
	// Optimistic uses no lock: a version compare-and-swap per order with
	// bounded retries.
	Optimistic Design = "optimistic"
	// Pessimistic uses no Redis lock: SELECT ... FOR UPDATE per order.
	Pessimistic Design = "pessimistic"
)

// Designs lists every design.
var Designs = []Design{PerRequest, Conditional, Optimistic, Pessimistic}

// Config tunes a design; the fields mean what the service's settings of
// the same names mean (order.request_timeout, lock.wait, order.max_retries,
// order.payment_timeout).
type Config struct {
	RequestTimeout time.Duration
	LockWait       time.Duration // PerRequest: longest wait for the lock before selling without it
	MaxRetries     int           // conflicts retried per order
	PaymentTimeout time.Duration // how long a new order stays pending; 0: paid at creation
}

// Orders sells with one design. It is safe for concurrent use.
type Orders struct {
	design Design
	db     *sql.DB
	locks  func() *lock.Client // PerRequest only
	cfg    Config
}

// New returns design d over db (opened with Open); locks returns the
// fresh lock client of each PerRequest order and may be nil otherwise.
func New(d Design, db *sql.DB, locks func() *lock.Client, cfg Config) (*Orders, error) {
	switch d {
	case Conditional, Optimistic, Pessimistic:
	case PerRequest:
		if locks == nil {
			return nil, errors.New("compare: per-request needs a lock client")
		}
	default:
		return nil, fmt.Errorf("compare: unknown design %q; want one of %v", d, Designs)
	}
	return &Orders{design: d, db: db, locks: locks, cfg: cfg}, nil
}

// Place sells r in a transaction of its own, or says why not: a domain
// error of service (ErrSoldOut, ErrLimitExceeded, ErrSKUNotFound, ...),
// service.ErrUnavailable when contention or the database left it
// uncharged, service.ErrOutcomeUnknown when its COMMIT failed.
func (o *Orders) Place(ctx context.Context, r service.OrderRequest) (service.Placed, error) {
	if err := r.Validate(); err != nil {
		return service.Placed{}, err
	}
	if r.IdempotencyKey != "" {
		return service.Placed{}, fmt.Errorf("%w: the comparison designs take no Idempotency-Key", service.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
	defer cancel()
	var fence int64
	if o.design == PerRequest {
		if l := o.obtain(ctx, r.SKUID); l != nil {
			defer release(l)
			fence = l.Fence()
		}
	}
	for retries := 0; ; retries++ {
		order, err := o.sell(ctx, r, fence)
		switch {
		case err == nil:
			return service.Placed{Order: order, Created: true}, nil
		case !errors.Is(err, errConflict):
			return service.Placed{}, answer(err)
		case retries >= o.cfg.MaxRetries || ctx.Err() != nil:
			return service.Placed{}, fmt.Errorf("%w: %d conflicts", service.ErrUnavailable, retries+1)
		}
		pause(ctx, retries+1)
	}
}

// answer passes the domain's refusals on and makes anything else a 503:
// nothing was committed.
func answer(err error) error {
	for _, domain := range []error{service.ErrSoldOut, service.ErrInsufficientStock, service.ErrLimitExceeded,
		service.ErrSaleNotActive, service.ErrSKUNotFound, service.ErrUnavailable, service.ErrOutcomeUnknown} {
		if errors.Is(err, domain) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", service.ErrUnavailable, err)
}

// obtain takes the SKU's lock, or returns nil to sell without it (Redis
// unreachable, or the lock held for all of LockWait): the version column
// keeps the sale correct.
func (o *Orders) obtain(ctx context.Context, skuID int64) *lock.Lock {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.LockWait)
	defer cancel()
	// The service's key: the SKU as a Redis Cluster hash tag.
	l, err := o.locks().Obtain(ctx, "{sku:"+strconv.FormatInt(skuID, 10)+"}")
	if err != nil {
		return nil
	}
	return l
}

func release(l *lock.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = l.Release(ctx) // a lease not released expires after its TTL: only slower
}

// pause waits a jittered, exponentially growing pause, or until ctx ends.
func pause(ctx context.Context, attempt int) {
	t := time.NewTimer(rand.N(time.Millisecond<<min(attempt, 6)) + 100*time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
