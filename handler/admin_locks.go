package handler

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

// locks serves the operators' view of the per-SKU locks.
type locks struct {
	catalog *service.Catalog
	locks   service.LockInspector // nil: no lock to inspect
	log     *slog.Logger
}

// LockJSON is a SKU's lock as its store knows it, as the API and `seckill
// locks -json` write it. The fence is a string: ZooKeeper's lie above
// 2^53, where JSON numbers lose digits.
type LockJSON struct {
	SKUID       int64      `json:"sku_id,omitempty"`
	Held        bool       `json:"held"`
	Owner       string     `json:"owner,omitempty"`
	Token       string     `json:"token,omitempty"`
	Fence       string     `json:"fence"`
	LeaseLeftMS int64      `json:"lease_left_ms"`
	HeldSince   *time.Time `json:"held_since,omitempty"`
	Renewed     bool       `json:"renewed"`
	Wanted      bool       `json:"wanted"`
	Waiters     int        `json:"waiters"`
	Queued      int        `json:"queued"`
	Nodes       []LockJSON `json:"nodes,omitempty"`
}

// NewLockJSON returns the JSON view of a SKU's lock.
func NewLockJSON(skuID int64, st service.LockState) LockJSON {
	v := LockJSON{SKUID: skuID,
		Held: st.Held, Owner: st.Owner, Token: st.Token, Fence: strconv.FormatInt(st.Fence, 10),
		LeaseLeftMS: st.LeaseLeft.Milliseconds(), Renewed: st.Renewed, Wanted: st.Wanted,
		Waiters: st.Waiters, Queued: st.Queued,
	}
	if !st.Since.IsZero() {
		since := st.Since.UTC()
		v.HeldSince = &since
	}
	for _, n := range st.Nodes {
		v.Nodes = append(v.Nodes, NewLockJSON(0, n))
	}
	return v
}

// get answers the lock of a SKU that exists, or may (the database is
// down); it never takes or extends the lock.
func (h *locks) get(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if h.locks == nil {
		fail(c, h.log, service.ErrUnavailable)
		return
	}
	// An unknown SKU is a 404; a database that cannot say is no reason to
	// hide the lock from an operator who is looking at an outage.
	if _, err := h.catalog.SKU(c.Request.Context(), id); err != nil && !errors.Is(err, service.ErrUnavailable) {
		fail(c, h.log, err)
		return
	}
	st, err := h.locks.InspectLock(c.Request.Context(), service.SKULockKey(id))
	if err != nil {
		fail(c, h.log, err)
		return
	}
	c.JSON(http.StatusOK, NewLockJSON(id, st))
}
