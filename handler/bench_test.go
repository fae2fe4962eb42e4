package handler_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/logging"
	"github.com/seckill/seckill/metrics"
	"github.com/seckill/seckill/service"
)

// placedOrders answers every order at once with the same created order:
// what is left of a request's cost is the HTTP path's own.
type placedOrders struct{ handler.Orders }

func (placedOrders) Place(_ context.Context, r service.OrderRequest) (service.Placed, error) {
	created := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	expires := created.Add(config.DefaultPaymentTimeout)
	return service.Placed{Created: true, Order: service.Order{
		ID: 42, SKUID: r.SKUID, UserID: r.UserID, Quantity: r.Quantity,
		CreatedAt: created, Status: service.OrderPending, ExpiresAt: &expires,
	}}, nil
}

// soldOutOrders refuses every order sold out, as Orders does at no I/O
// for a SKU known sold out: what is left is the refusal's HTTP path.
type soldOutOrders struct{ handler.Orders }

func (soldOutOrders) Place(context.Context, service.OrderRequest) (service.Placed, error) {
	return service.Placed{}, service.ErrSoldOut
}

// discardWriter is a ResponseWriter that keeps the status and drops the
// body, reused across requests so that the benchmark counts the
// handler's allocations, not a recorder's.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

// BenchmarkPlaceOrderHTTP is one POST /api/v1/orders through the whole
// Gin engine as production builds it (config.Default: shopper JWT
// verified, the access log on at level info into a JSON logger, the
// metrics middleware, the per-user and per-IP limiters, a request ID),
// with an order flow that answers at once: the CPU and allocations of the
// HTTP path alone. Every request carries a new token, so the
// verified-token cache only adds its cost ("cache off" runs without it).
func BenchmarkPlaceOrderHTTP(b *testing.B) {
	b.Run("defaults", func(b *testing.B) { benchmarkPlaceOrderHTTP(b, config.Default(), placedOrders{}, http.StatusCreated) })
	b.Run("cache off", func(b *testing.B) {
		cfg := config.Default()
		cfg.Auth.JWT.CacheEntries = 0
		benchmarkPlaceOrderHTTP(b, cfg, placedOrders{}, http.StatusCreated)
	})
	b.Run("sold out", func(b *testing.B) { benchmarkPlaceOrderHTTP(b, config.Default(), soldOutOrders{}, http.StatusConflict) })
	// The ceiling: POST /bench/constant through the same engine, reading
	// the same body and answering a constant order (make bench's ceiling).
	b.Run("ceiling", func(b *testing.B) { benchmarkPlaceOrderHTTP(b, config.Default(), nil, http.StatusCreated) })
	// A buyer's retries: the same 1,000 tokens again and again, each
	// verified once (make bench's VUs keep theirs).
	b.Run("sold out, known tokens", func(b *testing.B) {
		benchmarkPlaceOrderHTTP(b, config.Default(), soldOutOrders{}, http.StatusConflict, 1000)
	})
}

func benchmarkPlaceOrderHTTP(b *testing.B, cfg config.Config, orders handler.Orders, want int, tokens ...int) {
	cfg.Auth.JWT.Secret = testSecret
	log := logging.New(io.Discard, cfg.Log.Level, "json")
	v, err := auth.New(context.Background(), app.VerifierConfig(cfg.Auth.JWT), log)
	if err != nil {
		b.Fatal(err)
	}
	mx := metrics.New()
	path := "/api/v1/orders"
	if orders == nil {
		orders, path = placedOrders{}, "/bench/constant"
	}
	api, err := handler.New(handler.Config{
		Bench:        true,
		Orders:       orders,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes,
		Log:          log,
		Observer:     mx,
		Limits: handler.Limits{
			PerUserRate: cfg.Limits.PerUserRate, PerUserBurst: cfg.Limits.PerUserBurst,
			PerIPRate: cfg.Limits.PerIPRate, PerIPBurst: cfg.Limits.PerIPBurst, MaxKeys: cfg.Limits.MaxKeys,
		},
		AccessLog:   cfg.Log.Access,
		ShopperAuth: handler.ShopperAuth{Shoppers: v},
	})
	if err != nil {
		b.Fatal(err)
	}

	// Tokens are minted ahead, a chunk at a time outside the timer.
	const chunk = 4096
	secret := []byte(testSecret)
	type buyer struct{ auth, body string }
	buyers := make([]buyer, chunk)
	next := 0
	mint := func() {
		now := time.Now()
		for i := range buyers {
			user := "bench-" + strconv.Itoa(next)
			next++
			tok, err := auth.Mint(secret, auth.Claims{Subject: user, Audience: cfg.Auth.JWT.Audience, TTL: time.Hour}, now)
			if err != nil {
				b.Fatal(err)
			}
			buyers[i] = buyer{auth: "Bearer " + tok, body: `{"sku_id":1,"user_id":"` + user + `","quantity":1}`}
		}
	}
	mint()
	tmpl := httptest.NewRequest(http.MethodPost, path, nil)
	tmpl.RemoteAddr = "127.0.0.1:40000"
	tmpl.Header.Set("Content-Type", "application/json")
	tmpl.Header.Set("User-Agent", "k6/1.0 (https://k6.io/)")
	w := &discardWriter{header: http.Header{}}
	var body bytes.Reader
	i := 0
	b.ReportAllocs()
	if len(tokens) > 0 { // the buyers of the first chunk, again and again
		buyers = buyers[:tokens[0]]
	}
	for b.Loop() {
		if i == len(buyers) && len(tokens) > 0 {
			i = 0
		}
		if i == chunk {
			b.StopTimer()
			mint()
			i = 0
			b.StartTimer()
		}
		req := *tmpl
		req.Header = http.Header{"Content-Type": tmpl.Header["Content-Type"], "User-Agent": tmpl.Header["User-Agent"],
			"Authorization": {buyers[i].auth}}
		body.Reset([]byte(buyers[i].body))
		req.Body, req.ContentLength = io.NopCloser(&body), int64(len(buyers[i].body)) // as net/http's server sets it
		clear(w.header)
		w.status = 0
		api.ServeHTTP(w, &req)
		if w.status != want {
			b.Fatalf("POST /api/v1/orders = %d; want %d", w.status, want)
		}
		i++
	}
}
