package handler

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

type skuPage struct {
	SKUs      []adminSKUJSON `json:"skus"`
	NextAfter *string        `json:"next_after"`
}

// list pages through the SKUs by id: ?limit= (1–1000, default 100) and
// ?after= (see pageQuery).
func (h *skus) list(c *gin.Context) {
	list, limit, ok := readPage(c, h.ids, h.log, 100, service.MaxListLimit, h.catalog.List)
	if !ok {
		return
	}
	ids := make([]int64, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	units, err := h.catalog.OrderUnitsOf(c.Request.Context(), ids)
	if err != nil {
		fail(c, h.log, err)
		return
	}
	p := skuPage{SKUs: make([]adminSKUJSON, len(list))}
	for i, s := range list {
		p.SKUs[i] = adminSKU(s, units[s.ID])
	}
	if len(list) > 0 {
		p.NextAfter = nextAfter(h.ids, len(list), limit, list[len(list)-1].ID)
	}
	c.JSON(http.StatusOK, p)
}

// publicSKUPage is a page of the SKUs on sale.
type publicSKUPage struct {
	SKUs      []skuJSON `json:"skus"`
	NextAfter *string   `json:"next_after"`
}

// maxPublicPage bounds a public page: anyone may ask for it.
const maxPublicPage = 100

// onSale pages through the SKUs whose sale has not ended (open now or
// upcoming, sold out or not), by id: ?limit= (1–100, default 100) and
// ?after=. Ended sales are skipped after the read, so a page may hold
// fewer than limit SKUs; next_after is null only at the end.
func (h *skus) onSale(c *gin.Context) {
	list, limit, ok := readPage(c, h.ids, h.log, maxPublicPage, maxPublicPage, h.catalog.List)
	if !ok {
		return
	}
	now := time.Now()
	p := publicSKUPage{SKUs: make([]skuJSON, 0, len(list))}
	for _, s := range list {
		if s.EndsAt == nil || now.Before(*s.EndsAt) {
			p.SKUs = append(p.SKUs, publicSKU(s))
		}
	}
	if len(list) > 0 {
		p.NextAfter = nextAfter(h.ids, len(list), limit, list[len(list)-1].ID)
	}
	c.JSON(http.StatusOK, p)
}

// optionalTime is a time field of a PATCH body: absent (Set false), null
// (Set, nil: clear it) or an RFC 3339 time.
type optionalTime struct {
	Set  bool
	Time *time.Time
}

func (o *optionalTime) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(b, []byte("null")) {
		o.Time = nil
		return nil
	}
	var t time.Time
	if err := json.Unmarshal(b, &t); err != nil {
		return err
	}
	o.Time = &t
	return nil
}

type updateSKURequest struct {
	Name         *string      `json:"name"`
	PerUserLimit *int64       `json:"per_user_limit"`
	StartsAt     optionalTime `json:"starts_at"`
	EndsAt       optionalTime `json:"ends_at"`
}

// update changes the fields the body names: name, per_user_limit, and the
// sale window (null clears a bound).
func (h *skus) update(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var body updateSKURequest
	if !decode(c, h.max, &body) {
		return
	}
	s, err := h.catalog.Update(c.Request.Context(), id, service.SKUChange{
		Name:         body.Name,
		PerUserLimit: body.PerUserLimit,
		StartsAt:     service.OptionalTime(body.StartsAt),
		EndsAt:       service.OptionalTime(body.EndsAt),
	})
	if err != nil {
		fail(c, h.log, err)
		return
	}
	h.writeAdminSKU(c, http.StatusOK, s)
}

// skuLocation is the admin URL of a SKU, the Location of its 201.
func skuLocation(id int64) string { return "/admin/v1/skus/" + strconv.FormatInt(id, 10) }

// orderLocation is the URL of an order by its opaque (encoded) id, the
// Location of its 201.
func orderLocation(id string) string { return "/api/v1/orders/" + id }
