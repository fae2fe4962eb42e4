package handler

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/service"
)

type skus struct {
	catalog *service.Catalog
	orders  Orders
	max     int64
	log     *slog.Logger
	ids     *orderid.Codec
}

// skuJSON is the shoppers' view of a SKU.
type skuJSON struct {
	ID           int64      `json:"id"`
	Name         string     `json:"name"`
	Stock        int64      `json:"stock"`
	PerUserLimit int64      `json:"per_user_limit"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
}

// adminSKUJSON is the admins' view of a SKU.
type adminSKUJSON struct {
	skuJSON
	Sold    int64 `json:"sold"`
	Version int64 `json:"version"`
	// Pending and Paid split sold by the orders' status, in every admin
	// answer about a SKU; read after the SKU, so under a live sale they
	// may trail sold by the orders placed in between.
	Pending int64 `json:"pending"`
	Paid    int64 `json:"paid"`
}

func publicSKU(s service.SKU) skuJSON {
	return skuJSON{ID: s.ID, Name: s.Name, Stock: s.Stock, PerUserLimit: s.PerUserLimit, StartsAt: s.StartsAt, EndsAt: s.EndsAt}
}

func adminSKU(s service.SKU, u service.Units) adminSKUJSON {
	return adminSKUJSON{skuJSON: publicSKU(s), Sold: s.Sold, Version: s.Version, Pending: u.Pending, Paid: u.Paid}
}

// writeAdminSKU answers the admin view of s with its pending and paid units.
func (h *skus) writeAdminSKU(c *gin.Context, status int, s service.SKU) {
	pending, paid, err := h.catalog.OrderUnits(c.Request.Context(), s.ID)
	if err != nil {
		fail(c, h.log, err)
		return
	}
	c.JSON(status, adminSKU(s, service.Units{Pending: pending, Paid: paid}))
}

func (h *skus) get(c *gin.Context) {
	if s, ok := h.skuAt(c, h.orders.SKU); ok {
		c.JSON(http.StatusOK, publicSKU(s))
	}
}

func (h *skus) adminGet(c *gin.Context) {
	if s, ok := h.skuAt(c, h.catalog.SKU); ok {
		h.writeAdminSKU(c, http.StatusOK, s)
	}
}

// skuAt reads, through read, the SKU the path names; when it cannot, it
// has answered c and reports false.
func (h *skus) skuAt(c *gin.Context, read func(context.Context, int64) (service.SKU, error)) (service.SKU, bool) {
	id, ok := pathID(c, "id")
	if !ok {
		return service.SKU{}, false
	}
	s, err := read(c.Request.Context(), id)
	if err != nil {
		fail(c, h.log, err)
		return service.SKU{}, false
	}
	return s, true
}

type createSKURequest struct {
	Name         *string    `json:"name"`
	Stock        *int64     `json:"stock"`
	PerUserLimit *int64     `json:"per_user_limit"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
}

func (h *skus) create(c *gin.Context) {
	var body createSKURequest
	if !decode(c, h.max, &body) || !required(c, "name", body.Name != nil) || !required(c, "stock", body.Stock != nil) {
		return
	}
	n := service.NewSKU{Name: *body.Name, Stock: *body.Stock, PerUserLimit: 1, StartsAt: body.StartsAt, EndsAt: body.EndsAt}
	if body.PerUserLimit != nil {
		if *body.PerUserLimit < 1 {
			abort(c, http.StatusBadRequest, codeInvalid, "per_user_limit must be at least 1")
			return
		}
		n.PerUserLimit = *body.PerUserLimit
	}
	s, err := h.catalog.Create(c.Request.Context(), n)
	if err != nil {
		fail(c, h.log, err)
		return
	}
	c.Header("Location", skuLocation(s.ID))
	c.JSON(http.StatusCreated, adminSKU(s, service.Units{})) // new: no orders yet
}

type stockRequest struct {
	Stock *int64 `json:"stock"`
}

func (h *skus) setStock(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var body stockRequest
	if !decode(c, h.max, &body) || !required(c, "stock", body.Stock != nil) {
		return
	}
	s, err := h.catalog.SetStock(c.Request.Context(), id, *body.Stock)
	if err != nil {
		fail(c, h.log, err)
		return
	}
	h.writeAdminSKU(c, http.StatusOK, s)
}

type orderPage struct {
	Orders    []adminOrderJSON `json:"orders"`
	NextAfter *string          `json:"next_after"`
}

// adminOrderJSON is an order as admins see it: the shopper's opaque
// order_id and the internal id.
type adminOrderJSON struct {
	ID int64 `json:"id"`
	orderResponse
}

// listOrders pages through a SKU's orders by id: ?limit= (1–1000, default
// 100) and ?after= (see pageQuery).
func (h *skus) listOrders(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	list, limit, ok := readPage(c, h.ids, h.log, 100, service.MaxListLimit,
		func(ctx context.Context, after int64, limit int) ([]service.Order, error) {
			return h.catalog.Orders(ctx, id, after, limit)
		})
	if !ok {
		return
	}
	page := orderPage{Orders: make([]adminOrderJSON, len(list))}
	for i, o := range list {
		page.Orders[i] = adminOrderJSON{ID: o.ID, orderResponse: orderJSON(h.ids, o)}
	}
	if len(list) > 0 {
		page.NextAfter = nextAfter(h.ids, len(list), limit, list[len(list)-1].ID)
	}
	c.JSON(http.StatusOK, page)
}
