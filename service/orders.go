package service

import (
	"context"
	"errors"
)

// Seller sells the orders Place admits: package engine, which queues the
// buyers of each SKU and commits them in batches under the SKU's lock.
type Seller interface {
	// Sell places r, a valid request for a SKU that exists and is on
	// sale, or says why not. A request whose ctx ends while it waits is
	// not charged; one already in a committing batch gets that batch's
	// answer.
	Sell(ctx context.Context, r OrderRequest) (Placed, error)
	// Degraded reports that orders are sold on the database's guard alone.
	Degraded() bool
}

// Observer receives what the rules decide, for metrics. Methods must be
// cheap and safe for concurrent use.
type Observer interface {
	OrderResult(result string)
	// SoldOutFastPath counts a buyer refused sold out without a
	// transaction.
	SoldOutFastPath()
	// MarkUnpublished counts restocks whose shared mark could not be
	// written after retries.
	MarkUnpublished()
	// Allotted counts waiting orders given units by a transaction that
	// returned them through this instance.
	Allotted(orders int)
	// Waiters records a SKU's waiting orders as a commit left its row.
	Waiters(skuID, n int64)
}

type nopObserver struct{}

func (nopObserver) OrderResult(string)   {}
func (nopObserver) SoldOutFastPath()     {}
func (nopObserver) MarkUnpublished()     {}
func (nopObserver) Allotted(int)         {}
func (nopObserver) Waiters(int64, int64) {}

// OrderReader is what Orders reads of the database: a buyer's orders and
// the public view of a SKU.
type OrderReader interface {
	Order(ctx context.Context, id int64) (Order, error)
	// OrderByKey returns the order userID placed under the idempotency
	// key, or ErrNotFound: keys are the buyer's own.
	OrderByKey(ctx context.Context, userID, key string) (Order, error)
	// OrdersByUser returns up to limit orders of a user with ids above
	// after, oldest first.
	OrdersByUser(ctx context.Context, userID string, after int64, limit int) ([]Order, error)
	SKU(ctx context.Context, id int64) (SKU, error)
}

// Orders is the order flow as buyers see it: the rules a request must
// pass before a Seller sells it, and the buyer's view of their orders.
// It is safe for concurrent use.
type Orders struct {
	store  OrderReader
	skus   *Directory
	seller Seller
	obs    Observer
}

// NewOrders returns the order flow: skus admits, seller sells. obs may be nil.
func NewOrders(store OrderReader, skus *Directory, seller Seller, obs Observer) *Orders {
	if obs == nil {
		obs = nopObserver{}
	}
	return &Orders{store: store, skus: skus, seller: seller, obs: obs}
}

// Place sells r or says why not: a request that can never succeed, a SKU
// that does not exist, is known sold out (unless r waits) or is not on
// sale is answered here, without a queue; the others go to the Seller.
func (o *Orders) Place(ctx context.Context, r OrderRequest) (placed Placed, err error) {
	defer func() { o.obs.OrderResult(ResultOfPlaced(placed, err)) }()
	if err := r.Validate(); err != nil {
		return Placed{}, err
	}
	sku, err := o.skus.lookup(ctx, r.SKUID)
	if err != nil {
		return Placed{}, err
	}
	soldOut, err := o.skus.isSoldOut(ctx, sku)
	if err != nil {
		return Placed{}, err
	}
	if soldOut && !r.Wait { // a buyer who waits is answered by the database
		return o.refuseUnlocked(ctx, r, ErrSoldOut)
	}
	if closed, err := o.skus.saleClosed(ctx, sku); err != nil || closed {
		if err != nil {
			return Placed{}, err
		}
		return o.refuseUnlocked(ctx, r, ErrSaleNotActive)
	}
	return o.seller.Sell(ctx, r)
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

// Degraded reports whether orders are sold on the database's guard alone:
// the lock store was found unreachable.
func (o *Orders) Degraded() bool { return o.seller.Degraded() }

// Order returns the order with the given id.
func (o *Orders) Order(ctx context.Context, id int64) (Order, error) {
	return o.store.Order(ctx, id)
}

// SKU returns the SKU with the given id.
func (o *Orders) SKU(ctx context.Context, id int64) (SKU, error) {
	return o.store.SKU(ctx, id)
}
