package compare_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/bench/compare"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// newDesign returns design d with the service's defaults (config.Default)
// on a fresh database and the shared Redis, and the database.
func newDesign(t *testing.T, d compare.Design) (*compare.Orders, *sql.DB, string) {
	t.Helper()
	dsn := testenv.Database(t)
	cfg := config.Default()
	db, err := compare.Open(dsn, testenv.Pool, testenv.Pool, cfg.Order.RequestTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rdb, prefix := testenv.Redis(t)
	cfg.Lock.Prefix = prefix
	o, err := compare.New(d, db, func() *lock.Client { return lock.New(rdb, wiring.LockOptions(cfg)...) }, compare.Config{
		RequestTimeout: cfg.Order.RequestTimeout,
		LockWait:       cfg.Lock.Wait,
		MaxRetries:     cfg.Order.MaxRetries,
		PaymentTimeout: cfg.Order.PaymentTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	return o, db, dsn
}

// TestDesigns_NeverOversell runs every design with the service's default
// limits on a real database and Redis: 330 buyers (every tenth twice) for
// 100 units, one each. Under contention a design may give up (503,
// uncharged); what it answers created is exactly what sold, and the
// invariants hold.
func TestDesigns_NeverOversell(t *testing.T) {
	t.Parallel()
	for _, d := range compare.Designs {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			o, db, dsn := newDesign(t, d)
			sku, err := compare.CreateSKU(context.Background(), db, "c", 100, 1)
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu      sync.Mutex
				results = map[string]int{}
				wg      sync.WaitGroup
				start   = make(chan struct{})
			)
			for i := range 330 {
				wg.Go(func() {
					<-start
					p, err := o.Place(context.Background(), service.OrderRequest{SKUID: sku, UserID: fmt.Sprintf("u-%d", i%300), Quantity: 1})
					mu.Lock()
					results[service.ResultOf(err, p.Created)]++
					mu.Unlock()
				})
			}
			close(start)
			wg.Wait()
			sold := testenv.CheckInvariants(t, testenv.DB(t, dsn), sku)
			if int64(results["created"]) != sold {
				t.Errorf("%d buyers told created; sold = %d (results %v)", results["created"], sold, results)
			}
			if got := results["created"] + results["sold_out"] + results["limit_exceeded"] + results["unavailable"]; got != 330 {
				t.Errorf("%d of 330 answers from the contract: %v", got, results)
			}
			if (d == compare.Conditional || d == compare.Pessimistic) && results["created"] != 100 {
				// Their buyers queue on the row lock: none gives up while units are left.
				t.Errorf("%s sold %d of 100 to 300 distinct buyers: %v", d, results["created"], results)
			}
			t.Logf("%s: %v", d, results)
		})
	}
}

func TestNew_RefusesAnUnknownDesign(t *testing.T) {
	t.Parallel()
	for _, d := range []compare.Design{"locked", ""} {
		if _, err := compare.New(d, nil, nil, compare.Config{}); err == nil {
			t.Errorf("New(%q) = nil error; want one: production is service.Orders", d)
		}
	}
	if _, err := compare.New(compare.PerRequest, nil, nil, compare.Config{}); err == nil {
		t.Error("New(per-request) without a lock client = nil error; want one")
	}
}

// TestHandler_Contract sells through the design's HTTP server with a
// verified shopper, as the benchmark's k6 script does: each answer is the
// service's, and the database holds exactly the orders answered 201.
func TestHandler_Contract(t *testing.T) {
	t.Parallel()
	o, db, dsn := newDesign(t, compare.Conditional)
	const admin = "compare-admin-token-0123456789"
	secret := []byte("compare-shopper-secret-0123456789abcdef")
	v, err := auth.New(context.Background(), auth.Config{Secret: secret, Audience: "seckill"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(compare.Handler(o, compare.ServerConfig{DB: db, AdminToken: admin, Shoppers: v}))
	t.Cleanup(srv.Close)
	call := func(path, body string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	bearer := func(sub string) string {
		tok, err := auth.Mint(secret, auth.Claims{Subject: sub, Audience: "seckill", TTL: time.Hour}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}

	if got := call("/admin/v1/skus", `{"name":"s","stock":3,"per_user_limit":1}`); got != http.StatusUnauthorized {
		t.Errorf("create sku without the admin token = %d; want 401", got)
	}
	if got := call("/admin/v1/skus", `{"name":"s","stock":3,"per_user_limit":1}`, "Authorization", "Bearer "+admin); got != http.StatusCreated {
		t.Fatalf("create sku = %d; want 201", got)
	}
	var sku int64
	if err := db.QueryRow("SELECT id FROM skus").Scan(&sku); err != nil {
		t.Fatal(err)
	}
	order := func(user string) string { return fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, sku, user) }
	tests := []struct {
		name   string
		body   string
		header []string
		want   int
	}{
		{"no token", order("u-0"), nil, http.StatusUnauthorized},
		{"another's user_id", order("u-9"), []string{"Authorization", bearer("u-0")}, http.StatusForbidden},
		{"not JSON", `{"sku_id":`, []string{"Authorization", bearer("u-0")}, http.StatusBadRequest},
		{"idempotency key", order("u-0"), []string{"Authorization", bearer("u-0"), "Idempotency-Key", "k1"}, http.StatusBadRequest},
		{"unknown sku", `{"sku_id":987654321,"quantity":1}`, []string{"Authorization", bearer("u-0")}, http.StatusNotFound},
		{"first buyer", order("u-1"), []string{"Authorization", bearer("u-1")}, http.StatusCreated},
		{"first buyer again", order("u-1"), []string{"Authorization", bearer("u-1")}, http.StatusConflict}, // limit_exceeded
		{"second buyer, no user_id", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku), []string{"Authorization", bearer("u-2")}, http.StatusCreated},
		{"third buyer", order("u-3"), []string{"Authorization", bearer("u-3")}, http.StatusCreated},
		{"fourth buyer", order("u-4"), []string{"Authorization", bearer("u-4")}, http.StatusConflict}, // sold_out
	}
	for _, tc := range tests {
		if got := call("/api/v1/orders", tc.body, tc.header...); got != tc.want {
			t.Errorf("%s: POST /api/v1/orders = %d; want %d", tc.name, got, tc.want)
		}
	}
	if sold := testenv.CheckInvariants(t, testenv.DB(t, dsn), sku); sold != 3 {
		t.Errorf("sold = %d; want the 3 answered 201", sold)
	}
}
