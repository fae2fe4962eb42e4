package handler

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

// orderPath reads the opaque order id of the path. Anything that is not
// an id this service wrote is answered 404 like a missing order, without
// a database read.
func (h *orders) orderPath(c *gin.Context) (int64, bool) {
	id, ok := h.ids.Decode(c.Param("id"))
	if !ok {
		abort(c, http.StatusNotFound, codeNotFound, "not found")
	}
	return id, ok
}

// orderCaller identifies the caller of a route that names an order and
// decodes the order's id, answering a failure itself. With jwt an
// anonymous caller is refused: 401 when it asks for a change, the 404 of
// a missing order when it only reads.
func (h *orders) orderCaller(c *gin.Context, change bool) (user string, id int64, ok bool) {
	if h.auth.enabled() && anonymous(c) {
		if change {
			unauthorized(c, codeUnauthorized, "a bearer token is required: Authorization: Bearer <JWT>")
		} else {
			abort(c, http.StatusNotFound, codeNotFound, "not found")
		}
		return "", 0, false
	}
	if user, ok = h.auth.identify(c); !ok {
		return "", 0, false
	}
	id, ok = h.orderPath(c)
	return user, id, ok
}

// get answers an order to its buyer only. With jwt, an anonymous caller
// and anyone but the buyer get the 404 of a missing order; with none the
// opaque id is the only capability.
func (h *orders) get(c *gin.Context) {
	user, id, ok := h.orderCaller(c, false)
	if !ok {
		return
	}
	var (
		o   service.Order
		err error
	)
	if h.auth.enabled() {
		o, err = h.orders.OrderOf(c.Request.Context(), id, user)
	} else {
		o, err = h.orders.Order(c.Request.Context(), id)
	}
	if err != nil {
		fail(c, h.log, err)
		return
	}
	h.answerRead(c, o)
}

// myOrderPage is one page of the caller's orders; next_after is the
// opaque cursor of the next page, null on the last.
type myOrderPage struct {
	Orders    []orderResponse `json:"orders"`
	NextAfter *string         `json:"next_after"`
}

// Bounds of GET /api/v1/orders?limit=.
const (
	myOrdersDefault = 20
	myOrdersMax     = 100
)

// list pages through the verified caller's orders, oldest first:
// ?limit= (1–100, default 20) and ?after= (see pageQuery).
// With none there is no verified caller: 401.
func (h *orders) list(c *gin.Context) {
	if !h.auth.enabled() {
		unauthorized(c, codeUnauthorized, "listing one's orders needs a verified shopper (auth.shopper: jwt)")
		return
	}
	user, ok := h.auth.user(c)
	if !ok {
		return
	}
	list, limit, ok := readPage(c, h.ids, h.log, myOrdersDefault, myOrdersMax,
		func(ctx context.Context, after int64, limit int) ([]service.Order, error) {
			return h.orders.OrdersOf(ctx, user, after, limit)
		})
	if !ok {
		return
	}
	page := myOrderPage{Orders: make([]orderResponse, len(list))}
	for i, o := range list {
		page.Orders[i] = orderJSON(h.ids, o)
	}
	if len(list) > 0 {
		page.NextAfter = nextAfter(h.ids, len(list), limit, list[len(list)-1].ID)
	}
	c.JSON(http.StatusOK, page)
}
