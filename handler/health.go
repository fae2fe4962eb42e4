package handler

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

type health struct {
	ready    Readiness
	orders   Orders
	draining *atomic.Bool
	probes   *probeCache
}

func (h *health) live(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

type readiness struct {
	Status string `json:"status"` // ok, degraded (selling without Redis), unavailable or draining
	MySQL  string `json:"mysql"`  // up or down
	Redis  string `json:"redis"`  // up or down
	// Replicas is "ok", or "short" while fewer replicas keep up with the
	// primary than mysql.min_replicas; absent without it.
	Replicas string    `json:"mysql_replicas,omitempty"`
	Topology *Topology `json:"redis_topology,omitempty"`
	// Replication is the MariaDB replication's state, admin view only.
	Replication any `json:"mysql_replication,omitempty"`
}

// ReplicationReporter is a Readiness that also describes the MariaDB
// replication (mysql.replicas), without I/O and without credentials.
type ReplicationReporter interface {
	MySQLReplication() any // nil: none configured
	// ReplicasReady returns nil while enough replicas keep up to confirm
	// commits (mysql.min_replicas), else why not; ok is false when no
	// replica is asked for.
	ReplicasReady() (ok bool, err error)
}

// Topology is what the admin readiness view says about the Redis setup.
type Topology struct {
	Mode      string `json:"mode"`             // standalone, sentinel, cluster or redlock
	Master    string `json:"master,omitempty"` // with Sentinel: the master the sentinels name
	Failovers int64  `json:"failovers_seen"`   // with Sentinel: master changes this instance saw
}

// TopologyReporter is a Readiness that also describes the Redis setup;
// the admin readiness view includes it when the Readiness implements it.
type TopologyReporter interface {
	RedisTopology(ctx context.Context) Topology
}

// readiness answers 200 while MySQL answers (status "degraded" when Redis
// does not: orders are then sold on the database's guard alone) and 503
// when MySQL does not. It is public and unthrottled, so the dependencies
// are asked once per cache period at most, and it names no address.
func (h *health) readiness(c *gin.Context) {
	r, status := h.state(c.Request.Context())
	c.JSON(status, r)
}

// adminReadiness is readiness with the Redis topology, for operators:
// always 200, the body's status saying what /readyz answers.
func (h *health) adminReadiness(c *gin.Context) {
	r, _ := h.state(c.Request.Context())
	if tr, ok := h.ready.(TopologyReporter); ok {
		ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
		defer cancel()
		t := tr.RedisTopology(ctx)
		r.Topology = &t
	}
	if rr, ok := h.ready.(ReplicationReporter); ok {
		r.Replication = rr.MySQLReplication()
	}
	c.JSON(http.StatusOK, r)
}

func (h *health) state(ctx context.Context) (readiness, int) {
	p, err := h.probes.get(ctx, h.ready)
	if err != nil {
		p = probe{mysql: err, redis: err}
	}
	r := readiness{Status: "ok", MySQL: "up", Redis: "up"}
	if p.redis != nil || h.orders.Degraded() {
		r.Status = "degraded"
		if p.redis != nil {
			r.Redis = "down"
		}
	}
	status := http.StatusOK
	if rr, ok := h.ready.(ReplicationReporter); ok {
		if asked, err := rr.ReplicasReady(); asked {
			r.Replicas = "ok"
			if err != nil { // every write would be answered outcome_unknown
				r.Status, r.Replicas, status = "unavailable", "short", http.StatusServiceUnavailable
			}
		}
	}
	if p.mysql != nil {
		r.Status, r.MySQL, status = "unavailable", "down", http.StatusServiceUnavailable
	}
	if h.draining != nil && h.draining.Load() {
		r.Status, status = "draining", http.StatusServiceUnavailable
	}
	return r, status
}

// probe is one round of dependency checks.
type probe struct{ mysql, redis error }

// probeCache runs at most one round of dependency checks at a time and
// reuses its result for ttl from the round's start: concurrent and
// repeated /readyz calls cost one MySQL ping and one Redis round per ttl.
type probeCache struct {
	ttl    time.Duration
	mu     sync.Mutex
	last   probe
	at     time.Time     // when the last round began; zero before the first
	flight chan struct{} // closed when the round in flight ends; nil if none
}

// get returns the latest round's result while it is younger than ttl,
// else that of a new round (shared with every concurrent caller), waiting
// until ctx ends at most.
func (pc *probeCache) get(ctx context.Context, ready Readiness) (probe, error) {
	pc.mu.Lock()
	if !pc.at.IsZero() && time.Since(pc.at) < pc.ttl {
		p := pc.last
		pc.mu.Unlock()
		return p, nil
	}
	flight := pc.flight
	if flight == nil {
		flight = make(chan struct{})
		pc.flight = flight
		// Detached from this caller: its leaving must not fail the others.
		go pc.run(context.WithoutCancel(ctx), ready, flight)
	}
	pc.mu.Unlock()
	select {
	case <-flight:
		pc.mu.Lock()
		defer pc.mu.Unlock()
		return pc.last, nil
	case <-ctx.Done():
		return probe{}, ctx.Err()
	}
}

func (pc *probeCache) run(ctx context.Context, ready Readiness, flight chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	at := time.Now()
	p := probe{redis: ready.Redis(ctx), mysql: ready.MySQL(ctx)}
	pc.mu.Lock()
	pc.last, pc.at, pc.flight = p, at, nil
	pc.mu.Unlock()
	close(flight)
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
