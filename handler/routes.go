// Package handler is the HTTP API on Gin: routes.go lists it whole, one
// file per resource, and errors.go gives each kind of service.Results its
// status. Handlers decode, validate, call one service method, encode.
package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/logging"
	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/service"
)

// Readiness reports the state of the dependencies for /readyz.
type Readiness interface {
	// MySQL returns nil when the database answers.
	MySQL(ctx context.Context) error
	// Redis returns nil when Redis (a quorum, with Redlock) answers.
	Redis(ctx context.Context) error
}

// Orders is the order flow the API serves: *service.Orders, or a fake
// in tests.
type Orders interface {
	Place(ctx context.Context, r service.OrderRequest) (service.Placed, error)
	Order(ctx context.Context, id int64) (service.Order, error)
	SKU(ctx context.Context, id int64) (service.SKU, error)
	// Degraded reports that orders are sold on the database's guard alone.
	Degraded() bool
	// OrderOf and OrdersOf answer a buyer about their own orders.
	OrderOf(ctx context.Context, id int64, buyer string) (service.Order, error)
	OrdersOf(ctx context.Context, user string, after int64, limit int) ([]service.Order, error)
}

// Config is what the API needs.
type Config struct {
	Orders       Orders
	Catalog      *service.Catalog
	Ready        Readiness
	AdminToken   string
	MaxBodyBytes int64
	Log          *slog.Logger
	// Observer counts every answer (nil: none counted).
	Observer Observer
	// Extra GET routes mounted as they are (metrics).
	Extra map[string]http.Handler
	// Bench mounts POST /bench/constant (see config http.bench_endpoints).
	Bench bool
	// Limits are the per-user and per-IP rate limits.
	Limits Limits
	// TrustedProxies may set X-Forwarded-For for the per-IP limit; none by
	// default, so the client IP is the connection's.
	TrustedProxies []string
	// Draining, once true, makes /readyz answer 503 "draining" (nil: never).
	Draining *atomic.Bool
	// ReadyCache is how long /readyz reuses a round of dependency checks
	// (0: a round per call, concurrent calls still sharing one).
	ReadyCache time.Duration
	// AccessLog writes one line per request to Log (config log.access).
	AccessLog bool
	// Shopper auth and opaque order ids (see handler/auth.go).
	ShopperAuth
	// Lifecycle pays and cancels orders (nil: those routes answer 503).
	Lifecycle Lifecycle
	// PaymentTokens are the payment system's bearer tokens for
	// /internal/v1, comma-separated; none refuses every call.
	PaymentTokens string
	// Locks inspects the per-SKU locks (nil: that route answers 503).
	Locks service.LockInspector
	// Watch holds GET /api/v1/orders/{id} with Prefer: wait until the
	// order changes (nil: a wait is never applied).
	Watch Watcher
	// Tracer traces every request (nil: none is, at no cost).
	Tracer Tracer
}

// ShopperAuth is how shoppers are identified and how order ids look.
type ShopperAuth struct {
	// Shoppers verifies bearer tokens; nil is auth.shopper none (the
	// body's user_id is trusted).
	Shoppers Shoppers
	// OrderIDs encrypts order ids for clients; nil: a random key, so ids
	// do not outlive the process (tests only).
	OrderIDs *orderid.Codec
}

// New returns the whole API on one handler: the shop and the probes, the
// operator's routes (/admin, /internal) and Extra. It fails only on
// invalid trusted proxies.
func New(cfg Config) (http.Handler, error) {
	rs, err := newRoutes(cfg)
	if err != nil {
		return nil, err
	}
	r, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	rs.shop(r)
	rs.operator(r)
	return r, nil
}

// NewSplit returns the API as two handlers, for two listeners
// (http.admin_addr): public serves the shop and the probes, operator
// serves /admin, /internal and Extra (/metrics). Each answers the other's
// paths 404 not_found, so the public listener reveals none of them.
func NewSplit(cfg Config) (public, operator http.Handler, err error) {
	rs, err := newRoutes(cfg)
	if err != nil {
		return nil, nil, err
	}
	pub, err := newEngine(cfg)
	if err != nil {
		return nil, nil, err
	}
	op, err := newEngine(cfg)
	if err != nil {
		return nil, nil, err
	}
	rs.shop(pub)
	rs.operator(op)
	return pub, op, nil
}

// newEngine is a Gin engine with the middleware every route runs.
func newEngine(cfg Config) (*gin.Engine, error) {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	if err := r.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, err
	}
	r.HandleMethodNotAllowed = true
	// No redirects: every answer is JSON with an X-Request-ID, so
	// /api/v1/skus/1/ is a 404 that names the trailing slash.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.Use(requestID())
	if cfg.Tracer != nil {
		r.Use(traced(cfg.Tracer)) // before the access log, whose line carries the trace ID
	}
	if cfg.AccessLog {
		r.Use(accessLog(cfg.Log))
	}
	r.Use(recovery(cfg.Log), singleQuery())
	if cfg.Observer != nil {
		r.Use(observe(cfg.Observer))
	}
	r.NoRoute(notFound)
	r.NoMethod(func(c *gin.Context) {
		abort(c, http.StatusMethodNotAllowed, codeMethodNotAllowed, "method not allowed on this route")
	})
	return r, nil
}

// routes are the API's resources, built once and mounted on one engine
// or two.
type routes struct {
	cfg     Config
	orders  *orders
	skus    *skus
	health  *health
	perIP   *limiter
	locks   *locks
	payment *payments
}

func newRoutes(cfg Config) (*routes, error) {
	ids, err := orderIDs(cfg.OrderIDs)
	if err != nil {
		return nil, err
	}
	o := &orders{orders: cfg.Orders, max: cfg.MaxBodyBytes, log: cfg.Log,
		perUser: newLimiter(cfg.Limits.PerUserRate, cfg.Limits.PerUserBurst, cfg.Limits.MaxKeys),
		auth:    shopperAuth{verifier: cfg.Shoppers, log: cfg.Log}, ids: ids, lifecycle: cfg.Lifecycle, watch: cfg.Watch}
	return &routes{
		cfg:     cfg,
		orders:  o,
		skus:    &skus{catalog: cfg.Catalog, orders: cfg.Orders, max: cfg.MaxBodyBytes, log: cfg.Log, ids: ids},
		health:  &health{ready: cfg.Ready, orders: cfg.Orders, draining: cfg.Draining, probes: &probeCache{ttl: cfg.ReadyCache}},
		perIP:   newLimiter(cfg.Limits.PerIPRate, cfg.Limits.PerIPBurst, cfg.Limits.MaxKeys),
		locks:   &locks{catalog: cfg.Catalog, locks: cfg.Locks, log: cfg.Log},
		payment: newPayments(cfg.Lifecycle, o),
	}, nil
}

// shop mounts what shoppers and probes call.
func (rs *routes) shop(r *gin.Engine) {
	o, s, h := rs.orders, rs.skus, rs.health
	get(r, "/healthz", h.live)
	get(r, "/readyz", h.readiness)
	get(r, "/openapi.yaml", serveOpenAPI)

	api := r.Group("/api/v1")
	if rs.perIP != nil {
		api.Use(perIP(rs.perIP)) // off by default: not even the client IP's parse per request
	}
	api.POST("/orders", o.create)
	get(api, "/orders/:id", o.get)
	get(api, "/orders", o.list)
	api.POST("/orders/:id/cancel", o.cancel)
	get(api, "/skus", s.onSale)
	get(api, "/skus/:id", s.get)

	if rs.cfg.Bench {
		r.POST("/bench/constant", constant)
	}
}

// operator mounts what the operator and the payment system call, and
// Extra.
func (rs *routes) operator(r *gin.Engine) {
	s, h := rs.skus, rs.health
	admin := r.Group("/admin/v1", adminAuth(rs.cfg.AdminToken))
	admin.POST("/skus", s.create)
	get(admin, "/skus/:id", s.adminGet)
	admin.PUT("/skus/:id/stock", s.setStock)
	get(admin, "/skus/:id/orders", s.listOrders)
	get(admin, "/skus", s.list)
	admin.PATCH("/skus/:id", s.update)
	get(admin, "/readyz", h.adminReadiness)
	get(admin, "/skus/:id/lock", rs.locks.get)

	internal := r.Group("/internal/v1", bearerAuth(rs.cfg.PaymentTokens, "seckill payments", "a valid payment service bearer token is required"))
	internal.POST("/orders/:id/paid", rs.payment.paid)

	for path, h := range rs.cfg.Extra {
		get(r, path, gin.WrapH(h))
	}
}

// get registers h for GET and HEAD: a HEAD answers the GET's status and
// headers, and net/http drops the body.
func get(r gin.IRoutes, path string, h gin.HandlerFunc) {
	r.GET(path, h)
	r.HEAD(path, h)
}

// requestID gives every request an ID (a sane incoming X-Request-ID is
// kept), echoes it, and puts it in the context for the logs.
func requestID() gin.HandlerFunc {
	var prefix [6]byte
	_, _ = rand.Read(prefix[:]) // crypto/rand.Read never fails
	base := hex.EncodeToString(prefix[:]) + "-"
	var n atomic.Uint64
	return func(c *gin.Context) {
		// The canonical form of X-Request-ID, so that neither the read
		// nor the write canonicalizes (an allocation each) per request.
		var id string
		if vals := c.Request.Header["X-Request-Id"]; len(vals) > 0 {
			id = vals[0]
		}
		if !saneID(id) {
			id = base + strconv.FormatUint(n.Add(1), 10)
		}
		c.Writer.Header()["X-Request-Id"] = []string{id}
		ctx := context.WithValue(logging.WithRequestID(c.Request.Context(), id), answerKey{}, &answer{})
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// saneID reports whether a client's X-Request-ID may be kept: 1 to 64
// characters that read the same in a header, a JSON body, a JSON or text
// log line and a terminal (letters, digits and ._:/+=@-: UUIDs, trace ids,
// base64).
func saneID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("._:/+=@-", b) >= 0:
		default:
			return false
		}
	}
	return true
}

func recovery(log *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, v any) {
		log.ErrorContext(c.Request.Context(), "panic", "path", c.FullPath(), "panic", v)
		abort(c, statusOf[service.KindInternal], service.Internal.Code, service.Internal.Message)
	})
}

var constantOrder = []byte(`{"order_id":1,"sku_id":1,"user_id":"u-1","quantity":1,"created_at":"2026-11-11T00:00:00Z"}`)

// constant reads the body and answers a constant order: what serving HTTP
// costs with no order behind it, the ceiling of the benchmarks.
func constant(c *gin.Context) {
	if _, err := io.Copy(io.Discard, io.LimitReader(c.Request.Body, 1<<20)); err != nil {
		abort(c, http.StatusBadRequest, codeInvalid, "could not read the body")
		return
	}
	c.Data(http.StatusCreated, "application/json; charset=utf-8", constantOrder)
}

// orderIDs returns ids, or a codec under a random key when it is nil.
func orderIDs(ids *orderid.Codec) (*orderid.Codec, error) {
	if ids != nil {
		return ids, nil
	}
	k, err := orderid.ParseKey(orderid.RandomKey())
	if err != nil {
		return nil, err
	}
	return orderid.New(k)
}
