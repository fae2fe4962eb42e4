package handler

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

// Lifecycle is the order lifecycle the API serves: *service.Lifecycle.
type Lifecycle interface {
	// Pay records the payment system's confirmation; idempotent.
	Pay(ctx context.Context, id int64) (service.Order, error)
	// Cancel cancels buyer's pending order ("" with auth.shopper none);
	// idempotent.
	Cancel(ctx context.Context, id int64, buyer string) (service.Order, error)
}

// payments serves the payment system's confirmations.
type payments struct {
	lifecycle Lifecycle
	orders    *orders // the order id codec and the error log
}

// cancel cancels the caller's pending order and returns its units to the
// sale: 200 with the order (also for a repeat), 409 order_paid or
// order_expired, or the 404 of a missing order for anyone but its buyer.
func (h *orders) cancel(c *gin.Context) {
	user, id, ok := h.orderCaller(c, true)
	if !ok {
		return
	}
	if h.lifecycle == nil {
		fail(c, h.log, service.ErrUnavailable)
		return
	}
	o, err := h.lifecycle.Cancel(c.Request.Context(), id, user)
	if err != nil {
		fail(c, h.log, err)
		return
	}
	writeOrder(c, http.StatusOK, h.ids, o)
}

// paid records a payment: 200 with the paid order (also for a repeat),
// 409 order_cancelled or order_expired with nothing changed.
func (p *payments) paid(c *gin.Context) {
	id, ok := p.orders.orderPath(c)
	if !ok {
		return
	}
	if p.lifecycle == nil {
		fail(c, p.orders.log, service.ErrUnavailable)
		return
	}
	o, err := p.lifecycle.Pay(c.Request.Context(), id)
	if err != nil {
		fail(c, p.orders.log, err)
		return
	}
	writeOrder(c, http.StatusOK, p.orders.ids, o)
}

// newPayments returns the payment routes' handler.
func newPayments(lifecycle Lifecycle, o *orders) *payments {
	return &payments{lifecycle: lifecycle, orders: o}
}
