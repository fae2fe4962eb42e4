package handler

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/service"
)

type orders struct {
	orders  Orders
	max     int64
	log     *slog.Logger
	perUser *limiter
	auth    shopperAuth
	ids     *orderid.Codec
	// lifecycle cancels orders (handler/lifecycle.go).
	lifecycle Lifecycle
	// watch holds long-polls of an order (handler/longpoll.go); nil: none.
	watch Watcher
}

type orderRequest struct {
	SKUID    *int64  `json:"sku_id"`
	UserID   *string `json:"user_id"`
	Quantity *int64  `json:"quantity"`
	// Wait asks to wait for units when none can serve the order now (202).
	Wait *bool `json:"wait"`
}

type orderResponse struct {
	OrderID   string    `json:"order_id"` // opaque: see internal/orderid
	SKUID     int64     `json:"sku_id"`
	UserID    string    `json:"user_id"`
	Quantity  int64     `json:"quantity"`
	CreatedAt time.Time `json:"created_at"`
	// Status is pending (awaiting payment until expires_at), paid,
	// cancelled, expired, waiting (for units to come back, until
	// expires_at, the sale's end) or lapsed; expires_at is absent for an
	// order paid at creation (order.payment_timeout 0) and one waiting
	// for a sale without an end.
	Status      string     `json:"status"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	AllocatedAt *time.Time `json:"allocated_at,omitempty"` // when a waiting order was given its units
}

func orderJSON(ids *orderid.Codec, o service.Order) orderResponse {
	r := orderResponse{OrderID: ids.Encode(o.ID), SKUID: o.SKUID, UserID: o.UserID, Quantity: o.Quantity, CreatedAt: o.CreatedAt.UTC(),
		Status: string(o.Status)}
	if o.ExpiresAt != nil {
		t := o.ExpiresAt.UTC()
		r.ExpiresAt = &t
	}
	if o.AllocatedAt != nil {
		t := o.AllocatedAt.UTC()
		r.AllocatedAt = &t
	}
	return r
}

// create places an order: 201 with the order, 202 with the order waiting
// and its position in line (with "wait": true), 200 with the earlier order
// for a replayed Idempotency-Key, or an error from the contract.
func (h *orders) create(c *gin.Context) {
	key, ok := idempotencyKey(c)
	if !ok {
		return
	}
	verified, ok := h.auth.identify(c)
	if !ok {
		return
	}
	var body orderRequest
	if !decodeOrder(c, h.max, &body) || !required(c, "sku_id", body.SKUID != nil) || !required(c, "quantity", body.Quantity != nil) {
		return
	}
	user, ok := h.auth.buyer(c, verified, body.UserID)
	if !ok {
		return
	}
	if !h.perUser.allow(user) {
		rateLimited(c)
		return
	}
	a := answerOf(c)
	a.placed = true
	placed, err := h.orders.Place(c.Request.Context(), service.OrderRequest{
		SKUID: *body.SKUID, UserID: user, Quantity: *body.Quantity, IdempotencyKey: key, Wait: body.Wait != nil && *body.Wait,
	})
	if err != nil {
		fail(c, h.log, err)
		return
	}
	id := h.ids.Encode(placed.Order.ID)
	switch {
	case placed.Created && placed.Order.Status == service.OrderWaiting:
		a.outcome = service.ResultWaiting
		writeWaiting(c, id, placed)
	case placed.Created:
		a.outcome = service.ResultCreated
		writeOrderAs(c, http.StatusCreated, id, placed.Order)
	default:
		a.outcome = service.ResultReplayed
		writeOrderAs(c, http.StatusOK, id, placed.Order)
	}
}

// idempotencyKey returns the optional Idempotency-Key: 1–128 printable
// ASCII characters, not beginning or ending with a space, when present.
func idempotencyKey(c *gin.Context) (string, bool) {
	vals, present := c.Request.Header["Idempotency-Key"]
	if !present {
		return "", true
	}
	if len(vals) != 1 || vals[0] == "" || len(vals[0]) > service.MaxIdempotencyKeyLen || !printable(vals[0]) {
		abort(c, http.StatusBadRequest, codeInvalid, "Idempotency-Key must be one value of 1 to 128 printable ASCII characters")
		return "", false
	}
	if p := service.IDProblem(vals[0]); p != "" {
		abort(c, http.StatusBadRequest, codeInvalid, "Idempotency-Key "+p)
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
