package compare

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/service"
)

// Shoppers verifies a shopper's bearer token and returns its subject;
// *auth.Verifier is one.
type Shoppers interface {
	Verify(ctx context.Context, token string) (string, error)
}

// ServerConfig is what Handler serves with.
type ServerConfig struct {
	DB         *sql.DB
	AdminToken string
	// Shoppers, when set, verifies the bearer token of every order, whose
	// subject is the buyer, as the service does with auth.shopper jwt;
	// nil trusts the body's user_id.
	Shoppers Shoppers
	OrderIDs *orderid.Codec // encrypts the ids answered; nil: plain decimal
	MaxBody  int64          // bytes of a request body; 0: 64 KiB
}

// Handler serves a design with the routes the benchmark uses, in the
// service's contract: POST /api/v1/orders (201 with the order, 409 with
// sold_out and the other refusals, 404 sku_not_found, 400, 401, 403,
// 503), POST /admin/v1/skus and GET /readyz.
func Handler(o *Orders, cfg ServerConfig) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 10
	}
	s := &server{orders: o, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/orders", s.placeOrder)
	mux.HandleFunc("POST /admin/v1/skus", s.createSKU)
	mux.HandleFunc("GET /readyz", s.ready)
	return mux
}

type server struct {
	orders *Orders
	cfg    ServerConfig
}

// The refusals, as the service's handler/errors.go answers them.
var refusals = []struct {
	err    error
	status int
	code   string
}{
	{service.ErrSKUNotFound, http.StatusNotFound, "sku_not_found"},
	{service.ErrSoldOut, http.StatusConflict, "sold_out"},
	{service.ErrInsufficientStock, http.StatusConflict, "insufficient_stock"},
	{service.ErrLimitExceeded, http.StatusConflict, "limit_exceeded"},
	{service.ErrSaleNotActive, http.StatusConflict, "sale_not_active"},
	{service.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{service.ErrOutcomeUnknown, http.StatusServiceUnavailable, "outcome_unknown"},
	{service.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
}

type orderBody struct {
	SKUID    *int64  `json:"sku_id"`
	UserID   *string `json:"user_id"`
	Quantity *int64  `json:"quantity"`
}

type orderAnswer struct {
	OrderID   string     `json:"order_id"`
	SKUID     int64      `json:"sku_id"`
	UserID    string     `json:"user_id"`
	Quantity  int64      `json:"quantity"`
	CreatedAt time.Time  `json:"created_at"`
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

func (s *server) placeOrder(w http.ResponseWriter, r *http.Request) {
	if _, keyed := r.Header["Idempotency-Key"]; keyed {
		writeError(w, http.StatusBadRequest, "invalid_request", "the comparison designs take no Idempotency-Key")
		return
	}
	verified, ok := s.shopper(w, r)
	if !ok {
		return
	}
	var b orderBody
	if !decode(w, r, s.cfg.MaxBody, &b) {
		return
	}
	if b.SKUID == nil || b.Quantity == nil {
		writeError(w, http.StatusBadRequest, "invalid_request", `fields "sku_id" and "quantity" are required`)
		return
	}
	user, ok := s.buyer(w, verified, b.UserID)
	if !ok {
		return
	}
	placed, err := s.orders.Place(r.Context(), service.OrderRequest{SKUID: *b.SKUID, UserID: user, Quantity: *b.Quantity})
	if err != nil {
		writeRefusal(w, err)
		return
	}
	o := placed.Order
	id := strconv.FormatInt(o.ID, 10)
	if s.cfg.OrderIDs != nil {
		id = s.cfg.OrderIDs.Encode(o.ID)
	}
	writeJSON(w, http.StatusCreated, orderAnswer{OrderID: id, SKUID: o.SKUID, UserID: o.UserID, Quantity: o.Quantity,
		CreatedAt: o.CreatedAt, Status: string(o.Status), ExpiresAt: o.ExpiresAt})
}

// shopper is the subject of the request's verified bearer token, or 401;
// "" when the server trusts the body (no Shoppers).
func (s *server) shopper(w http.ResponseWriter, r *http.Request) (string, bool) {
	if s.cfg.Shoppers == nil {
		return "", true
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sub, err := s.cfg.Shoppers.Verify(r.Context(), token)
	if !ok || err != nil {
		writeError(w, http.StatusUnauthorized, "unauthorized", "a valid shopper bearer token is required")
		return "", false
	}
	return sub, true
}

// buyer is who buys: the body's user_id without Shoppers, else the token's
// subject, which a user_id given must be.
func (s *server) buyer(w http.ResponseWriter, verified string, userID *string) (string, bool) {
	switch {
	case s.cfg.Shoppers == nil && userID == nil:
		writeError(w, http.StatusBadRequest, "invalid_request", `field "user_id" is required`)
		return "", false
	case s.cfg.Shoppers == nil:
		return *userID, true
	case userID != nil && *userID != verified:
		writeError(w, http.StatusForbidden, "user_mismatch", "user_id must be the bearer token's subject (or omitted)")
		return "", false
	}
	return verified, true
}

// writeRefusal answers err as the service's handler would.
func writeRefusal(w http.ResponseWriter, err error) {
	for _, f := range refusals {
		if errors.Is(err, f.err) {
			writeError(w, f.status, f.code, err.Error())
			return
		}
	}
	writeError(w, http.StatusInternalServerError, "internal", "internal error")
}

type skuBody struct {
	Name         string `json:"name"`
	Stock        int64  `json:"stock"`
	PerUserLimit int64  `json:"per_user_limit"`
}

func (s *server) createSKU(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if s.cfg.AdminToken == "" || subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.AdminToken)) != 1 {
		writeError(w, http.StatusUnauthorized, "unauthorized", "the admin bearer token is required")
		return
	}
	b := skuBody{PerUserLimit: 1}
	if !decode(w, r, s.cfg.MaxBody, &b) {
		return
	}
	if b.Name == "" || b.Stock < 0 || b.PerUserLimit < 1 {
		writeError(w, http.StatusBadRequest, "invalid_request", "want a name, stock >= 0 and per_user_limit >= 1")
		return
	}
	id, err := CreateSKU(r.Context(), s.cfg.DB, b.Name, b.Stock, b.PerUserLimit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": id, "name": b.Name, "stock": b.Stock, "per_user_limit": b.PerUserLimit})
}

func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.DB.PingContext(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// decode reads one JSON object of at most max bytes into v, or answers 400.
func decode(w http.ResponseWriter, r *http.Request, max int64, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the body is not the JSON object expected: "+err.Error())
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may have left
}
