package service

import "context"

// OrderOf returns order id if buyer placed it. Anyone else gets
// ErrNotFound, the answer for a missing order, so an order's existence is
// not revealed to whoever guesses its id.
func (o *Orders) OrderOf(ctx context.Context, id int64, buyer string) (Order, error) {
	ord, err := o.store.Order(ctx, id)
	if err != nil {
		return Order{}, err
	}
	if ord.UserID != buyer {
		return Order{}, ErrNotFound
	}
	return ord, nil
}

// OrdersOf returns up to limit orders of user with ids above after,
// oldest first.
func (o *Orders) OrdersOf(ctx context.Context, user string, after int64, limit int) ([]Order, error) {
	if limit < 1 || limit > 1000 {
		return nil, invalid("limit must be between 1 and 1000")
	}
	if after < 0 {
		return nil, invalid("after must not be negative")
	}
	return o.store.OrdersByUser(ctx, user, after, limit)
}
