package handler

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

type orders struct {
	orders  *service.Orders
	max     int64
	log     *slog.Logger
	perUser *limiter
}

type orderRequest struct {
	SKUID    *int64  `json:"sku_id"`
	UserID   *string `json:"user_id"`
	Quantity *int64  `json:"quantity"`
}

type orderResponse struct {
	OrderID   int64     `json:"order_id"`
	SKUID     int64     `json:"sku_id"`
	UserID    string    `json:"user_id"`
	Quantity  int64     `json:"quantity"`
	CreatedAt time.Time `json:"created_at"`
}

func orderJSON(o service.Order) orderResponse {
	return orderResponse{OrderID: o.ID, SKUID: o.SKUID, UserID: o.UserID, Quantity: o.Quantity, CreatedAt: o.CreatedAt.UTC()}
}

// create places an order: 201 with the order, 200 with the earlier order
// for a replayed Idempotency-Key, or an error from the contract.
func (h *orders) create(c *gin.Context) {
	key, ok := idempotencyKey(c)
	if !ok {
		return
	}
	var body orderRequest
	if !decode(c, h.max, &body) {
		return
	}
	switch {
	case body.SKUID == nil:
		abort(c, http.StatusBadRequest, codeInvalid, `field "sku_id" is required`)
		return
	case body.UserID == nil:
		abort(c, http.StatusBadRequest, codeInvalid, `field "user_id" is required`)
		return
	case body.Quantity == nil:
		abort(c, http.StatusBadRequest, codeInvalid, `field "quantity" is required`)
		return
	}
	if !h.perUser.allow(*body.UserID) {
		rateLimited(c)
		return
	}
	c.Set(placeCalled, true)
	placed, err := h.orders.Place(c.Request.Context(), service.OrderRequest{
		SKUID: *body.SKUID, UserID: *body.UserID, Quantity: *body.Quantity, IdempotencyKey: key,
	})
	if err != nil {
		fail(c, h.log, err)
		return
	}
	status := http.StatusCreated
	if !placed.Created {
		status = http.StatusOK
	} else {
		c.Header("Location", orderLocation(placed.Order.ID))
	}
	writeOrder(c, status, placed.Order)
}

// idempotencyKey returns the optional Idempotency-Key: 1–128 printable
// ASCII characters when present.
func idempotencyKey(c *gin.Context) (string, bool) {
	vals, present := c.Request.Header["Idempotency-Key"]
	if !present {
		return "", true
	}
	if len(vals) != 1 || vals[0] == "" || len(vals[0]) > service.MaxIdempotencyKeyLen || !printable(vals[0]) {
		abort(c, http.StatusBadRequest, codeInvalid, "Idempotency-Key must be one value of 1 to 128 printable ASCII characters")
		return "", false
	}
	return vals[0], true
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func (h *orders) get(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	o, err := h.orders.Order(c.Request.Context(), id)
	if err != nil {
		fail(c, h.log, err)
		return
	}
	writeOrder(c, http.StatusOK, o)
}
