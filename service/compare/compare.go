// Package compare holds the order designs the service is measured against
// (`make bench`, config order.strategy): the ones people usually write,
// each committing one order per transaction with no per-SKU queue and no
// sold-out fast path. They share the Store and its guards with
// production, so they never oversell; they are only slower. Production
// runs service.Orders, not these.
package compare

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/seckill/seckill/service"
)

// Design names one way of reaching the database.
type Design string

// The designs.
const (
	// PerRequest takes the SKU's lock for every request (the locker a
	// fresh client per request, so every waiter polls Redis) and commits
	// the order alone.
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

// Config tunes a design; the fields mean what they mean in service.OrdersConfig.
type Config struct {
	RequestTimeout time.Duration
	LockWait       time.Duration // PerRequest: longest wait for the lock before selling without it
	MaxRetries     int
}

// Orders sells with one design. It is safe for concurrent use.
type Orders struct {
	design Design
	store  service.Store
	locker service.Locker // PerRequest only
	cfg    Config
	obs    Observer
}

// Observer receives what the designs do, for metrics; *metrics.Metrics
// (a service.Observer) is one.
type Observer interface {
	OrderResult(result string)
	Batch(size int, commit time.Duration, retries int, err error)
}

// New returns the design d over store; locker is used by PerRequest only.
// obs may be nil.
func New(d Design, store service.Store, locker service.Locker, cfg Config, obs Observer) (*Orders, error) {
	switch d {
	case PerRequest, Conditional, Optimistic, Pessimistic:
	default:
		return nil, fmt.Errorf("compare: unknown design %q", d)
	}
	if obs == nil {
		obs = nopObserver{}
	}
	return &Orders{design: d, store: store, locker: locker, cfg: cfg, obs: obs}, nil
}

// Place sells r in a transaction of its own, or says why not.
func (o *Orders) Place(ctx context.Context, r service.OrderRequest) (placed service.Placed, err error) {
	defer func() { o.obs.OrderResult(service.ResultOf(err, placed.Created)) }()
	if err := r.Validate(); err != nil {
		return service.Placed{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
	defer cancel()
	b := service.Batch{SKUID: r.SKUID, Requests: []service.OrderRequest{r}, Mode: service.ModeVersion}
	switch o.design {
	case Conditional:
		b.Mode = service.ModeConditional
	case Pessimistic:
		b.Mode = service.ModePessimistic
	case PerRequest:
		if lease := o.obtain(ctx, r.SKUID); lease != nil {
			defer release(lease)
			b.Fence = lease.Fence()
		}
	}
	res, err := o.commit(ctx, b)
	if err != nil {
		return service.Placed{}, err
	}
	out := res.Outcomes[0]
	return out.Placed, out.Err
}

// obtain takes the SKU's lock, or returns nil to sell without it (Redis
// unreachable, or the lock held for all of LockWait): the version column
// keeps the sale correct.
func (o *Orders) obtain(ctx context.Context, skuID int64) service.Lease {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.LockWait)
	defer cancel()
	lease, err := o.locker.Obtain(ctx, "sku:"+strconv.FormatInt(skuID, 10))
	if err != nil {
		return nil
	}
	return lease
}

func release(lease service.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = lease.Release(ctx) // a lease not released expires after its TTL: only slower
}

// commit runs b, retrying version conflicts with jittered back-off.
func (o *Orders) commit(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	start := time.Now()
	var (
		res     service.BatchResult
		err     error
		retries int
	)
	for {
		b.Now = time.Now().UTC().Truncate(time.Microsecond)
		res, err = o.store.CommitBatch(ctx, b)
		if !errors.Is(err, service.ErrConflict) || retries >= o.cfg.MaxRetries || ctx.Err() != nil {
			break
		}
		retries++
		pause(ctx, retries)
	}
	o.obs.Batch(1, time.Since(start), retries, err)
	switch {
	case err == nil, errors.Is(err, service.ErrSKUNotFound), errors.Is(err, service.ErrUnavailable):
	default: // conflicts left after the retries, a stale fence
		err = fmt.Errorf("%w: %w", service.ErrUnavailable, err)
	}
	return res, err
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

type nopObserver struct{}

func (nopObserver) OrderResult(string)                   {}
func (nopObserver) Batch(int, time.Duration, int, error) {}
