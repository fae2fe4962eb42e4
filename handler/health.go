package handler

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

type health struct {
	ready    Readiness
	orders   Orders
	draining *atomic.Bool
}

func (h *health) live(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

type readiness struct {
	Status   string    `json:"status"` // ok, degraded (selling without Redis), unavailable or draining
	MySQL    string    `json:"mysql"`  // up or down
	Redis    string    `json:"redis"`  // up or down
	Topology *Topology `json:"redis_topology,omitempty"`
}

// Topology is what /readyz says about the Redis setup.
type Topology struct {
	Mode      string `json:"mode"`             // standalone, sentinel, cluster or redlock
	Master    string `json:"master,omitempty"` // with Sentinel: the master the sentinels name
	Failovers int64  `json:"failovers_seen"`   // with Sentinel: master changes this instance saw
}

// TopologyReporter is a Readiness that also describes the Redis setup;
// /readyz includes it when the Readiness implements it.
type TopologyReporter interface {
	RedisTopology(ctx context.Context) Topology
}

// readiness answers 200 while MySQL answers (status "degraded" when Redis
// does not: orders are then sold on the database's guard alone) and 503
// when MySQL does not.
func (h *health) readiness(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
	defer cancel()
	r := readiness{Status: "ok", MySQL: "up", Redis: "up"}
	if err := h.ready.Redis(ctx); err != nil || h.orders.Degraded() {
		r.Status = "degraded"
		if err != nil {
			r.Redis = "down"
		}
	}
	if tr, ok := h.ready.(TopologyReporter); ok {
		t := tr.RedisTopology(ctx)
		r.Topology = &t
	}
	status := http.StatusOK
	if err := h.ready.MySQL(ctx); err != nil {
		r.Status, r.MySQL, status = "unavailable", "down", http.StatusServiceUnavailable
	}
	if h.draining != nil && h.draining.Load() {
		r.Status, status = "draining", http.StatusServiceUnavailable
	}
	c.JSON(status, r)
}

//go:embed openapi.yaml
var openAPI []byte

func serveOpenAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/yaml", openAPI)
}

// adminAuth requires "Authorization: Bearer <token>" where tokens is one
// token or a comma-separated list (to rotate one without downtime: add
// the new, roll out, remove the old). Each is compared in constant time
// over SHA-256 digests, so neither which one matched nor a length leaks.
func adminAuth(tokens string) gin.HandlerFunc {
	return bearerAuth(tokens, "seckill admin", "a valid admin bearer token is required")
}

// bearerAuth admits requests bearing one of tokens (comma-separated; none
// admits nobody), compared in constant time; the others get 401 naming
// realm. Tokens are never logged.
func bearerAuth(tokens, realm, message string) gin.HandlerFunc {
	var want [][sha256.Size]byte
	for _, t := range strings.Split(tokens, ",") {
		if t = strings.TrimSpace(t); t != "" {
			want = append(want, sha256.Sum256([]byte(t)))
		}
	}
	return func(c *gin.Context) {
		got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		match := 0
		for _, w := range want {
			match |= subtle.ConstantTimeCompare(sum[:], w[:])
		}
		if !ok || match != 1 {
			c.Header("WWW-Authenticate", `Bearer realm="`+realm+`"`)
			abort(c, http.StatusUnauthorized, codeUnauthorized, message)
			return
		}
		c.Next()
	}
}
