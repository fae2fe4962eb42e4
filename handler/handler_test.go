package handler_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

const adminToken = "test-admin-token-0123456789abcdef" // 32 characters

// paymentToken is the payment system's token (auth.payment_tokens).
const paymentToken = "test-payment-token-0123456789abc"

// fakeReady is the Readiness the tests switch by hand.
type fakeReady struct {
	mu           sync.Mutex
	mysql, redis error
}

func (f *fakeReady) set(mysql, redis error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mysql, f.redis = mysql, redis
}

func (f *fakeReady) MySQL(context.Context) error { f.mu.Lock(); defer f.mu.Unlock(); return f.mysql }
func (f *fakeReady) Redis(context.Context) error { f.mu.Lock(); defer f.mu.Unlock(); return f.redis }

var _ handler.Readiness = (*fakeReady)(nil)

// stack is the whole API over a fresh MariaDB database and the shared
// Redis (own key prefix), served on a real listener.
type stack struct {
	url    string
	client *http.Client
	appDB  *gorm.DB // the pool the service uses
	db     *gorm.DB // a pool of the test's own, to look behind the API
	ready  *fakeReady
	spec   *apiSpec
	rdb    *redis.Client
	prefix string // the test's Redis key prefix
	orders *service.Orders
	seller *engine.Seller
	// sweeper expires due orders when a test calls SweepOnce.
	sweeper *service.Sweeper
	// watch holds the long-polls of GET /api/v1/orders/{id}.
	watch *service.Watch
}

type stackOptions struct {
	commits  func(engine.Committer) engine.Committer // wraps what the engine commits through
	queueMax int
	limits   handler.Limits
	auth     handler.ShopperAuth     // zero: auth.shopper none, random order id key
	admin    string                  // admin token(s); default adminToken
	extra    map[string]http.Handler // handler.Config.Extra (metrics)
	log      *slog.Logger            // with the access log on; default testenv.Logger, access log off
	locks    service.LockInspector   // default: the stack's own lock
	// waitlistMax is order.waitlist_max; 0: the default.
	waitlistMax int
	// pollsMax is order.long_polls_max; 0: the default.
	pollsMax int
}

func newStack(t *testing.T, opts ...func(*stackOptions)) *stack {
	t.Helper()
	o := stackOptions{queueMax: 1000, admin: adminToken}
	for _, f := range opts {
		f(&o)
	}
	dsn := testenv.Database(t)
	s := &stack{appDB: testenv.DB(t, dsn), db: testenv.DB(t, dsn), ready: &fakeReady{}}
	rdb, prefix := testenv.Redis(t)
	s.rdb, s.prefix = rdb, prefix
	log := testenv.Logger()
	// Production defaults (config.Default), on the test's own key prefix.
	cfg := config.Default()
	cfg.Lock.Prefix = prefix
	cfg.Order.QueueMax = o.queueMax
	if o.waitlistMax > 0 {
		cfg.Order.WaitlistMax = o.waitlistMax
	}
	store := repository.NewMySQL(s.appDB, repository.WithPaymentTimeout(cfg.Order.PaymentTimeout))
	var commits engine.Committer = store
	if o.commits != nil {
		commits = o.commits(commits)
	}
	lc := lock.New(rdb, wiring.OrderLockOptions(cfg)...)
	t.Cleanup(func() { lc.Close() })
	var locker engine.Locker = locking.NewRedisLocker(lc)
	marks := locking.NewRedisMarks(rdb, prefix+"soldout:", cfg.SoldOut.SharedTTL)
	if o.pollsMax > 0 {
		cfg.Order.LongPollsMax = o.pollsMax
	}
	skus := service.NewDirectory(store, marks, wiring.DirectoryConfig(cfg), log, nil)
	s.watch = service.NewWatch(store, locking.NewRedisFeed(rdb, prefix), wiring.WatchConfig(cfg), log, nil)
	skus.Tell(s.watch)
	s.watch.Start()
	t.Cleanup(func() { s.watch.Close() })
	seller := engine.New(commits, locker, skus, marks, wiring.EngineConfig(cfg), log, nil)
	orders := service.NewOrders(store, skus, seller, nil)
	s.orders, s.seller = orders, seller
	catalog := service.NewCatalog(store, store, skus, log)
	settle := repository.NewMySQL(s.appDB, repository.WithPaymentTimeout(cfg.Order.PaymentTimeout))
	s.sweeper = service.NewSweeper(settle, nil, skus, wiring.SweeperConfig(cfg), log, nil)
	apiLog := log
	if o.log != nil {
		apiLog = o.log
	}
	api, err := handler.New(handler.Config{
		Orders:       orders,
		Catalog:      catalog,
		Ready:        s.ready,
		AdminToken:   o.admin,
		MaxBodyBytes: 4096,
		Log:          apiLog,
		Limits:       o.limits,
		ShopperAuth:  o.auth,
		Extra:        o.extra,
		AccessLog:    o.log != nil,

		Lifecycle:     service.NewLifecycle(settle, skus, log, nil),
		PaymentTokens: paymentToken,
		Locks:         cmp.Or(o.locks, locker.(service.LockInspector)),
		Watch:         s.watch,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := seller.Shutdown(ctx); err != nil {
			t.Errorf("seller.Shutdown: %v", err)
		}
	})
	s.url = srv.URL
	s.client = srv.Client()
	s.client.Timeout = 30 * time.Second
	s.spec = parseSpec(t, s.get(t, "/openapi.yaml").body)
	return s
}

// reply is one HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
	code   string // the error code of a 4xx/5xx
	msg    string // the error message of a 4xx/5xx
}

func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

var bearer = []string{"Authorization", "Bearer " + adminToken}

// call sends one request. headers are name, value pairs, added as they
// are (an empty value or a repeated name included). Every answer is held
// to the contract: no 5xx but 503, JSON, an error body with a documented
// code, and a status documented for the operation.
func (s *stack) call(t *testing.T, method, path, body string, headers ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" && !slices.Contains(headers, "Content-Type") {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header[http.CanonicalHeaderKey(headers[i])] = append(req.Header[http.CanonicalHeaderKey(headers[i])], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil { // Errorf, not Fatalf: call runs on other goroutines too
		t.Errorf("%s %s: %v", method, path, err)
		return reply{}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: read body: %v", method, path, err)
		return reply{}
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: raw}
	where := fmt.Sprintf("%s %s", method, path)
	if r.status >= 500 && r.status != http.StatusServiceUnavailable {
		t.Errorf("%s = %d %s; a 5xx other than 503 is a bug", where, r.status, raw)
	}
	if r.header.Get("X-Request-ID") == "" {
		t.Errorf("%s: no X-Request-ID", where)
	}
	if path == "/openapi.yaml" || path == "/metrics" { // the two answers that are not JSON
		return r
	}
	if r.status == http.StatusNotModified {
		if len(raw) != 0 || r.header.Get("ETag") == "" {
			t.Errorf("%s = 304 with body %q, ETag %q; want no body and the ETag", where, raw, r.header.Get("ETag"))
		}
		if s.spec != nil {
			s.checkDocumented(t, method, path, r)
		}
		return r
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type = %q; want application/json", where, ct)
	}
	if r.status >= 400 && path != "/readyz" && method != http.MethodHead {
		var e struct {
			Error struct {
				Code      string `json:"code"`
				Message   string `json:"message"`
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Errorf(`%s = %d %s; want {"error":{"code","message","request_id"}} (%v)`, where, r.status, raw, err)
		}
		if id := r.header.Get("X-Request-ID"); e.Error.RequestID != id || id == "" {
			t.Errorf("%s: the error body's request_id %q; want the X-Request-ID answered, %q", where, e.Error.RequestID, id)
		}
		r.code, r.msg = e.Error.Code, e.Error.Message
		if s.spec != nil && !s.spec.codes[r.code] {
			t.Errorf("%s: error code %q is not in the ErrorCode enum of openapi.yaml", where, r.code)
		}
	}
	if method == http.MethodHead && r.status == http.StatusMethodNotAllowed {
		r.code = "method_not_allowed" // no body to read it from
	}
	if s.spec != nil {
		s.checkDocumented(t, method, path, r)
	}
	return r
}

// checkDocumented requires the status to be documented for the operation
// (unknown routes answer 404 and unknown methods 405, as documented in info).
func (s *stack) checkDocumented(t *testing.T, method, path string, r reply) {
	t.Helper()
	tmpl, ok := s.spec.match(path)
	if !ok {
		if r.status != http.StatusNotFound || r.code != "not_found" {
			t.Errorf("%s %s (no such route) = %d %q; want 404 not_found", method, path, r.status, r.code)
		}
		return
	}
	op, ok := s.spec.doc.Paths[tmpl][strings.ToLower(method)]
	if !ok {
		if r.status != http.StatusMethodNotAllowed || r.code != "method_not_allowed" {
			t.Errorf("%s %s (no such method) = %d %q; want 405 method_not_allowed", method, path, r.status, r.code)
		}
		return
	}
	if _, ok := op.Responses[strconv.Itoa(r.status)]; !ok {
		t.Errorf("%s %s = %d, which openapi.yaml does not document for %s %s", method, path, r.status, method, tmpl)
	}
}

func (s *stack) get(t *testing.T, path string, headers ...string) reply {
	t.Helper()
	return s.call(t, http.MethodGet, path, "", headers...)
}

// createSKU creates a SKU through the admin API and returns its id.
func (s *stack) createSKU(t *testing.T, body string) int64 {
	t.Helper()
	r := s.call(t, http.MethodPost, "/admin/v1/skus", body, bearer...)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /admin/v1/skus %s = %d %s; want 201", body, r.status, r.body)
	}
	var sku adminSKU
	r.json(t, &sku)
	return sku.ID
}

// buy places an order that must succeed and returns its id.
func (s *stack) buy(t *testing.T, sku int64, user string, qty int64, key string) string {
	t.Helper()
	var h []string
	if key != "" {
		h = []string{"Idempotency-Key", key}
	}
	body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":%d}`, sku, user, qty)
	r := s.call(t, http.MethodPost, "/api/v1/orders", body, h...)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/v1/orders %s = %d %s; want 201", body, r.status, r.body)
	}
	var o order
	r.json(t, &o)
	return o.OrderID
}

type order struct {
	ID        int64      `json:"id"` // the admin list only
	OrderID   string     `json:"order_id"`
	SKUID     int64      `json:"sku_id"`
	UserID    string     `json:"user_id"`
	Quantity  int64      `json:"quantity"`
	CreatedAt time.Time  `json:"created_at"`
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// waitingOrder is an order as a 202 answers it, with its position, or
// as a later answer does, given its units.
type waitingOrder struct {
	order
	AllocatedAt *time.Time `json:"allocated_at"`
	Position    *int64     `json:"position"` // a 202 only
}

// wait asks for qty units of sku with "wait": true and wants 202: the
// order waiting, at position. It returns the order.
func (s *stack) wait(t *testing.T, sku int64, user string, qty int64, key string, position int64) waitingOrder {
	t.Helper()
	var h []string
	if key != "" {
		h = []string{"Idempotency-Key", key}
	}
	body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":%d,"wait":true}`, sku, user, qty)
	r := s.call(t, http.MethodPost, "/api/v1/orders", body, h...)
	var o waitingOrder
	if r.status == http.StatusAccepted {
		r.json(t, &o)
	}
	if r.status != http.StatusAccepted || o.Status != "waiting" || o.Position == nil || *o.Position != position ||
		r.header.Get("Location") != "/api/v1/orders/"+o.OrderID {
		t.Fatalf("POST /api/v1/orders %s = %d %s (Location %q); want 202, waiting at position %d, its Location", body, r.status, r.body, r.header.Get("Location"), position)
	}
	return o
}

type adminSKU struct {
	ID           int64      `json:"id"`
	Name         string     `json:"name"`
	Stock        int64      `json:"stock"`
	PerUserLimit int64      `json:"per_user_limit"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
	Sold         int64      `json:"sold"`
	Version      int64      `json:"version"`
}

// skuState is a SKU as the database holds it, with what hangs off it.
type skuState struct {
	Stock, Sold, Total, Version int64
	Orders, OrderedUnits, Held  int64
}

// state reads a SKU behind the API and checks the invariants (stock never negative, stock + sold == total).
func (s *stack) state(t *testing.T, id int64) skuState {
	t.Helper()
	var st skuState
	if err := s.db.Raw("SELECT stock, sold, total_stock, version FROM skus WHERE id = ?", id).Row().
		Scan(&st.Stock, &st.Sold, &st.Total, &st.Version); err != nil {
		t.Fatalf("read sku %d: %v", id, err)
	}
	if err := s.db.Raw("SELECT COUNT(*), COALESCE(SUM(quantity), 0) FROM orders WHERE sku_id = ?", id).Row().
		Scan(&st.Orders, &st.OrderedUnits); err != nil {
		t.Fatalf("read orders of sku %d: %v", id, err)
	}
	if err := s.db.Raw("SELECT COALESCE(SUM(quantity), 0) FROM user_purchases WHERE sku_id = ?", id).Row().
		Scan(&st.Held); err != nil {
		t.Fatalf("read holdings of sku %d: %v", id, err)
	}
	if st.Stock < 0 || st.Stock+st.Sold != st.Total || st.OrderedUnits != st.Sold || st.Held != st.Sold {
		t.Errorf("sku %d breaks the invariants: %+v", id, st)
	}
	return st
}

// TestPlaceOrder runs every kind of order request against a SKU of its
// own (stock 10, 3 per user unless the case says otherwise) and checks the
// answer and what it did to the SKU: a 201 takes exactly the quantity,
// anything else takes nothing.
func TestPlaceOrder(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	now := time.Now().UTC()
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }
	long := func(n int) string { return strings.Repeat("k", n) }
	valid := `{"sku_id":{sku},"user_id":"u-1","quantity":1}`

	type setup func(t *testing.T, s *stack, sku int64) (orderID string)
	buyFirst := func(user string, qty int64, key string) setup {
		return func(t *testing.T, s *stack, sku int64) string { return s.buy(t, sku, user, qty, key) }
	}
	buyOtherSKU := func(key string) setup {
		return func(t *testing.T, s *stack, _ int64) string {
			other := s.createSKU(t, `{"name":"other","stock":5}`)
			return s.buy(t, other, "u-1", 1, key)
		}
	}

	tests := []struct {
		name    string
		sku     string // the SKU's create body; "" is stock 10, 3 per user
		setup   setup
		body    string // {sku} stands for the SKU's id
		size    int    // pad the body with blanks to this many bytes
		headers []string
		status  int
		code    string
		user    string // the user_id a 201 must echo; "" is u-1
		sameAs  bool   // a 200 must answer the order setup placed
		msg     string // a part of the error message, which a user acts on
	}{
		{name: "created", body: valid, status: 201},
		{name: "quantity up to the per-user limit", body: `{"sku_id":{sku},"user_id":"u-1","quantity":3}`, status: 201},
		{name: "fields in another order", body: `{"quantity":1,"user_id":"u-1","sku_id":{sku}}`, status: 201},
		{name: "trailing whitespace", body: valid + " \n\t", status: 201},
		{name: "body of exactly the limit", body: valid, size: 4096, status: 201},
		{name: "unicode user within 64 bytes", body: `{"sku_id":{sku},"user_id":"käufer-用户-😀","quantity":1}`, user: "käufer-用户-😀", status: 201},
		{name: "user of 64 bytes", body: `{"sku_id":{sku},"user_id":"` + long(64) + `","quantity":1}`, user: long(64), status: 201},
		{name: "user of 16 four-byte runes", body: `{"sku_id":{sku},"user_id":"` + strings.Repeat("😀", 16) + `","quantity":1}`, user: strings.Repeat("😀", 16), status: 201},
		{name: "escaped unicode user", body: `{"sku_id":{sku},"user_id":"\u00e9t\u00e9","quantity":1}`, user: "été", status: 201},

		{name: "malformed JSON", body: `{"sku_id":{sku},"user_id":"u-1","quantity":`, status: 400, code: "invalid_request", msg: "the body is not valid JSON: it ends early"},
		{name: "not JSON", body: `buy please`, status: 400, code: "invalid_request", msg: "the body is not valid JSON: invalid character 'b'"},
		{name: "single quotes", body: `{'sku_id':{sku}}`, status: 400, code: "invalid_request", msg: "the body is not valid JSON: invalid character '\\'' looking for beginning of object key string (at byte 2)"},
		{name: "empty body", body: ``, status: 400, code: "invalid_request", msg: "the body is empty"},
		{name: "blank body", body: "  \n", status: 400, code: "invalid_request", msg: "the body is empty"},
		{name: "null body", body: `null`, status: 400, code: "invalid_request", msg: "the body must be a JSON object, not null"},
		{name: "array body", body: `[` + valid + `]`, status: 400, code: "invalid_request", msg: "not an array"},
		{name: "string body", body: `"order"`, status: 400, code: "invalid_request", msg: "not a string"},
		{name: "number body", body: `1`, status: 400, code: "invalid_request", msg: "not a number"},
		{name: "text/plain body", body: valid, headers: []string{"Content-Type", "text/plain"}, status: 415, code: "unsupported_media_type", msg: "Content-Type: application/json"},
		{name: "form body", body: valid, headers: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 415, code: "unsupported_media_type"},
		{name: "unparsable content type", body: valid, headers: []string{"Content-Type", "application/json; ;"}, status: 415, code: "unsupported_media_type"},
		{name: "JSON with charset", body: valid, headers: []string{"Content-Type", "application/json; charset=utf-8"}, status: 201},
		{name: "JSON structured suffix", body: valid, headers: []string{"Content-Type", "application/vnd.order+json"}, status: 201},
		{name: "empty object", body: `{}`, status: 400, code: "invalid_request"},
		{name: "trailing garbage", body: valid + `x`, status: 400, code: "invalid_request"},
		{name: "trailing brace", body: valid + `}`, status: 400, code: "invalid_request"},
		{name: "trailing comma", body: valid + `,`, status: 400, code: "invalid_request"},
		{name: "two objects", body: valid + valid, status: 400, code: "invalid_request"},
		{name: "two objects on two lines", body: valid + "\n" + valid, status: 400, code: "invalid_request"},
		{name: "unknown field", body: `{"sku_id":{sku},"user_id":"u-1","quantity":1,"coupon":"FREE"}`, status: 400, code: "invalid_request", msg: `field "coupon" is not known; the fields are sku_id, user_id, quantity`},
		{name: "body one byte over the limit", body: valid, size: 4097, status: 413, code: "request_too_large"},
		{name: "oversize body", body: `{"sku_id":{sku},"user_id":"` + long(64<<10) + `","quantity":1}`, status: 413, code: "request_too_large"},

		{name: "sku_id missing", body: `{"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id null", body: `{"sku_id":null,"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id string", body: `{"sku_id":"{sku}","user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id float", body: `{"sku_id":{sku}.5,"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id integral float", body: `{"sku_id":{sku}.0,"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id bool", body: `{"sku_id":true,"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id array", body: `{"sku_id":[{sku}],"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id object", body: `{"sku_id":{"id":{sku}},"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id zero", body: `{"sku_id":0,"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id negative", body: `{"sku_id":-5,"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id beyond int64", body: `{"sku_id":9223372036854775808,"user_id":"u-1","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "sku_id non-existent", body: `{"sku_id":987654321,"user_id":"u-1","quantity":1}`, status: 404, code: "sku_not_found"},
		{name: "sku_id max int64", body: `{"sku_id":9223372036854775807,"user_id":"u-1","quantity":1}`, status: 404, code: "sku_not_found"},

		{name: "user_id missing", body: `{"sku_id":{sku},"quantity":1}`, status: 400, code: "invalid_request"},
		{name: "user_id null", body: `{"sku_id":{sku},"user_id":null,"quantity":1}`, status: 400, code: "invalid_request"},
		{name: "user_id empty", body: `{"sku_id":{sku},"user_id":"","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "user_id only spaces", body: `{"sku_id":{sku},"user_id":"  \t ","quantity":1}`, status: 400, code: "invalid_request", msg: "user_id must not be empty or only spaces"},
		{name: "user_id with a trailing space", body: `{"sku_id":{sku},"user_id":"u-1 ","quantity":1}`, status: 400, code: "invalid_request", msg: "user_id must not begin or end with white space"},
		{name: "user_id with a leading space", body: `{"sku_id":{sku},"user_id":" u-1","quantity":1}`, status: 400, code: "invalid_request", msg: "white space"},
		{name: "user_id ending in a no-break space", body: `{"sku_id":{sku},"user_id":"u-1\u00a0","quantity":1}`, status: 400, code: "invalid_request", msg: "white space"},
		{name: "user_id ending in a newline", body: `{"sku_id":{sku},"user_id":"u-1\n","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "user_id with a control character", body: `{"sku_id":{sku},"user_id":"u\u0000-1","quantity":1}`, status: 400, code: "invalid_request", msg: "user_id must not contain control characters"},
		{name: "user_id with a C1 control character", body: `{"sku_id":{sku},"user_id":"u\u0085-1","quantity":1}`, status: 400, code: "invalid_request", msg: "control characters"},
		{name: "user_id with inner spaces", body: `{"sku_id":{sku},"user_id":"u 1","quantity":1}`, user: "u 1", status: 201},
		{name: "user_id of 65 bytes", body: `{"sku_id":{sku},"user_id":"` + long(65) + `","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "user_id of 22 runes, 66 bytes", body: `{"sku_id":{sku},"user_id":"` + strings.Repeat("用", 22) + `","quantity":1}`, status: 400, code: "invalid_request"},
		{name: "user_id number", body: `{"sku_id":{sku},"user_id":7,"quantity":1}`, status: 400, code: "invalid_request"},
		{name: "user_id array", body: `{"sku_id":{sku},"user_id":["u-1"],"quantity":1}`, status: 400, code: "invalid_request"},
		{name: "user_id bool", body: `{"sku_id":{sku},"user_id":false,"quantity":1}`, status: 400, code: "invalid_request"},

		{name: "quantity missing", body: `{"sku_id":{sku},"user_id":"u-1"}`, status: 400, code: "invalid_request"},
		{name: "quantity null", body: `{"sku_id":{sku},"user_id":"u-1","quantity":null}`, status: 400, code: "invalid_request"},
		{name: "quantity zero", body: `{"sku_id":{sku},"user_id":"u-1","quantity":0}`, status: 400, code: "invalid_request"},
		{name: "quantity negative", body: `{"sku_id":{sku},"user_id":"u-1","quantity":-1}`, status: 400, code: "invalid_request"},
		{name: "quantity float", body: `{"sku_id":{sku},"user_id":"u-1","quantity":1.5}`, status: 400, code: "invalid_request", msg: `field "quantity" must be an integer from 1 to 1073741824`},
		{name: "quantity exponent", body: `{"sku_id":{sku},"user_id":"u-1","quantity":1e0}`, status: 400, code: "invalid_request"},
		{name: "quantity 1e30", body: `{"sku_id":{sku},"user_id":"u-1","quantity":1e30}`, status: 400, code: "invalid_request"},
		{name: "quantity 2^63", body: `{"sku_id":{sku},"user_id":"u-1","quantity":9223372036854775808}`, status: 400, code: "invalid_request", msg: "from 1 to 1073741824"},
		{name: "quantity -2^63-1", body: `{"sku_id":{sku},"user_id":"u-1","quantity":-9223372036854775809}`, status: 400, code: "invalid_request"},
		{name: "quantity above 2^30", body: `{"sku_id":{sku},"user_id":"u-1","quantity":1073741825}`, status: 400, code: "invalid_request"},
		{name: "quantity 2^30 over the limit", body: `{"sku_id":{sku},"user_id":"u-1","quantity":1073741824}`, status: 409, code: "limit_exceeded"},
		{name: "quantity string", body: `{"sku_id":{sku},"user_id":"u-1","quantity":"1"}`, status: 400, code: "invalid_request"},
		{name: "quantity bool", body: `{"sku_id":{sku},"user_id":"u-1","quantity":true}`, status: 400, code: "invalid_request"},
		{name: "quantity array", body: `{"sku_id":{sku},"user_id":"u-1","quantity":[1]}`, status: 400, code: "invalid_request"},

		{name: "key of 1 character", body: valid, headers: []string{"Idempotency-Key", "k"}, status: 201},
		{name: "key of 128 characters", body: valid, headers: []string{"Idempotency-Key", long(128)}, status: 201},
		{name: "key with inner spaces and punctuation", body: valid, headers: []string{"Idempotency-Key", "order #1 (retry) ~!"}, status: 201},
		{name: "key empty", body: valid, headers: []string{"Idempotency-Key", ""}, status: 400, code: "invalid_request"},
		{name: "key of 129 characters", body: valid, headers: []string{"Idempotency-Key", long(129)}, status: 400, code: "invalid_request"},
		{name: "key with a tab", body: valid, headers: []string{"Idempotency-Key", "a\tb"}, status: 400, code: "invalid_request"},
		{name: "key not ASCII", body: valid, headers: []string{"Idempotency-Key", "ключ"}, status: 400, code: "invalid_request"},
		{name: "key sent twice", body: valid, headers: []string{"Idempotency-Key", "k1", "Idempotency-Key", "k2"}, status: 400, code: "invalid_request"},
		{name: "key bad and body bad", body: `{`, headers: []string{"Idempotency-Key", ""}, status: 400, code: "invalid_request"},

		{name: "replay", setup: buyFirst("u-1", 1, "replay-key"), body: valid, headers: []string{"Idempotency-Key", "replay-key"}, status: 200, sameAs: true},
		{name: "replay with other spacing and field order", setup: buyFirst("u-1", 1, "spacing-key"), body: "{ \"quantity\" : 1 , \"user_id\":\"u-1\", \"sku_id\" : {sku} }", headers: []string{"Idempotency-Key", "spacing-key"}, status: 200, sameAs: true},
		{name: "replay at the per-user limit", sku: `{"name":"c","stock":10,"per_user_limit":1}`, setup: buyFirst("u-1", 1, "limit-key"), body: valid, headers: []string{"Idempotency-Key", "limit-key"}, status: 200, sameAs: true},
		{name: "replay after sold out", sku: `{"name":"c","stock":1}`, setup: buyFirst("u-1", 1, "sold-key"), body: valid, headers: []string{"Idempotency-Key", "sold-key"}, status: 200, sameAs: true},
		{name: "key reused with another quantity", setup: buyFirst("u-1", 1, "qty-key"), body: `{"sku_id":{sku},"user_id":"u-1","quantity":2}`, headers: []string{"Idempotency-Key", "qty-key"}, status: 409, code: "idempotency_conflict"},
		{name: "key used by another user is not theirs", setup: buyFirst("u-1", 1, "user-key"), body: `{"sku_id":{sku},"user_id":"u-2","quantity":1}`, headers: []string{"Idempotency-Key", "user-key"}, user: "u-2", status: 201},
		{name: "key reused for another sku", setup: buyOtherSKU("sku-key"), body: valid, headers: []string{"Idempotency-Key", "sku-key"}, status: 409, code: "idempotency_conflict"},
		{name: "key reused after sold out", sku: `{"name":"c","stock":1}`, setup: buyFirst("u-1", 1, "sold-key-2"), body: `{"sku_id":{sku},"user_id":"u-1","quantity":2}`, headers: []string{"Idempotency-Key", "sold-key-2"}, status: 409, code: "idempotency_conflict"},
		{name: "another user's key after sold out reveals nothing", sku: `{"name":"c","stock":1}`, setup: buyFirst("u-1", 1, "sold-key-3"), body: `{"sku_id":{sku},"user_id":"u-2","quantity":1}`, headers: []string{"Idempotency-Key", "sold-key-3"}, status: 409, code: "sold_out"},

		{name: "sold out", sku: `{"name":"c","stock":1}`, setup: buyFirst("u-0", 1, ""), body: valid, status: 409, code: "sold_out", msg: "sold out"},
		{name: "sold out with a key", sku: `{"name":"c","stock":1}`, setup: buyFirst("u-0", 1, ""), body: valid, headers: []string{"Idempotency-Key", "late"}, status: 409, code: "sold_out"},
		{name: "more than the stock left", sku: `{"name":"c","stock":2,"per_user_limit":5}`, body: `{"sku_id":{sku},"user_id":"u-1","quantity":3}`, status: 409, code: "insufficient_stock", msg: "fewer units are left than the quantity asked for"},
		{name: "two asked, one left", sku: `{"name":"c","stock":2,"per_user_limit":5}`, setup: buyFirst("u-0", 1, ""), body: `{"sku_id":{sku},"user_id":"u-1","quantity":2}`, status: 409, code: "insufficient_stock"},
		{name: "zero stock", sku: `{"name":"c","stock":0}`, body: valid, status: 409, code: "sold_out"},
		{name: "over the per-user limit at once", body: `{"sku_id":{sku},"user_id":"u-1","quantity":4}`, status: 409, code: "limit_exceeded", msg: "would take the user over the sku's per_user_limit"},
		{name: "over the per-user limit in total", sku: `{"name":"c","stock":10,"per_user_limit":2}`, setup: buyFirst("u-1", 2, ""), body: valid, status: 409, code: "limit_exceeded"},
		{name: "limit is per user", sku: `{"name":"c","stock":10,"per_user_limit":1}`, setup: buyFirst("u-1", 1, ""), body: `{"sku_id":{sku},"user_id":"u-2","quantity":1}`, user: "u-2", status: 201},
		{name: "sale not started", sku: `{"name":"c","stock":10,"starts_at":"` + at(time.Hour) + `"}`, body: valid, status: 409, code: "sale_not_active"},
		{name: "sale over", sku: `{"name":"c","stock":10,"starts_at":"` + at(-2*time.Hour) + `","ends_at":"` + at(-time.Hour) + `"}`, body: valid, status: 409, code: "sale_not_active"},
		{name: "sale ended, no start", sku: `{"name":"c","stock":10,"ends_at":"` + at(-time.Minute) + `"}`, body: valid, status: 409, code: "sale_not_active"},
		{name: "sale open", sku: `{"name":"c","stock":10,"starts_at":"` + at(-time.Hour) + `","ends_at":"` + at(time.Hour) + `"}`, body: valid, status: 201},
		{name: "sale open, other time zone", sku: `{"name":"c","stock":10,"starts_at":"` + now.Add(-time.Hour).In(time.FixedZone("", 14*3600)).Format(time.RFC3339) + `"}`, body: valid, status: 201},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			skuBody := tc.sku
			if skuBody == "" {
				skuBody = `{"name":"case","stock":10,"per_user_limit":3}`
			}
			sku := s.createSKU(t, skuBody)
			var setupOrder string
			if tc.setup != nil {
				setupOrder = tc.setup(t, s, sku)
			}
			before := s.state(t, sku)
			body := strings.ReplaceAll(tc.body, "{sku}", strconv.FormatInt(sku, 10))
			if tc.size > 0 {
				body = body[:len(body)-1] + strings.Repeat(" ", tc.size-len(body)) + "}"
			}

			r := s.call(t, http.MethodPost, "/api/v1/orders", body, tc.headers...)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("POST /api/v1/orders = %d %q (%s); want %d %q", r.status, r.code, r.body, tc.status, tc.code)
			}
			if !strings.Contains(r.msg, tc.msg) {
				t.Errorf("POST /api/v1/orders answered %s; want its message to say %q", r.body, tc.msg)
			}
			after := s.state(t, sku)

			if r.status != http.StatusCreated {
				if after != before {
					t.Errorf("a %d changed sku %d: before %+v, after %+v", r.status, sku, before, after)
				}
			}
			if r.status >= 300 {
				return
			}
			var o order
			r.json(t, &o)
			var req struct {
				SKUID    int64  `json:"sku_id"`
				UserID   string `json:"user_id"`
				Quantity int64  `json:"quantity"`
			}
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			if len(o.OrderID) != 22 || o.SKUID != sku || o.UserID != req.UserID || o.Quantity != req.Quantity || o.CreatedAt.IsZero() {
				t.Errorf("order = %+v; want sku %d, user %q, quantity %d", o, sku, req.UserID, req.Quantity)
			}
			if tc.user != "" && o.UserID != tc.user {
				t.Errorf("user_id = %q; want %q", o.UserID, tc.user)
			}
			if r.status == http.StatusOK {
				if tc.sameAs && o.OrderID != setupOrder {
					t.Errorf("replay answered order %s; want the earlier %s", o.OrderID, setupOrder)
				}
				return
			}
			want := before
			want.Stock -= req.Quantity
			want.Sold += req.Quantity
			want.OrderedUnits += req.Quantity
			want.Held += req.Quantity
			want.Orders++
			want.Version++
			if after != want {
				t.Errorf("after a 201: %+v; want %+v", after, want)
			}
			// The order is what GET returns.
			var got order
			g := s.get(t, "/api/v1/orders/"+o.OrderID)
			if g.status != http.StatusOK {
				t.Fatalf("GET the new order = %d %s", g.status, g.body)
			}
			g.json(t, &got)
			if !o.CreatedAt.Equal(got.CreatedAt) || got.OrderID != o.OrderID || got.UserID != o.UserID || got.Quantity != o.Quantity {
				t.Errorf("GET order = %+v; POST answered %+v", got, o)
			}
		})
	}
}

func TestGetOrder(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"g","stock":5}`)
	id := s.buy(t, sku, "buyer", 1, "")
	tests := []struct {
		name   string
		id     string
		status int
		code   string
	}{
		{"found", id, 200, ""},
		// Ids are opaque: anything this service did not write is missing.
		{"one character changed", flip(id), 404, "not_found"},
		{"prefix", id[:21], 404, "not_found"},
		{"internal id", "1", 404, "not_found"},
		{"max int64", "9223372036854775807", 404, "not_found"},
		{"zero", "0", 404, "not_found"},
		{"negative", "-1", 404, "not_found"},
		{"not base64", strings.Repeat("!", 22), 404, "not_found"},
		{"22 letters", strings.Repeat("A", 22), 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.get(t, "/api/v1/orders/"+tc.id)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("GET /api/v1/orders/%s = %d %q (%s); want %d %q", tc.id, r.status, r.code, r.body, tc.status, tc.code)
			}
			if r.status == http.StatusOK {
				var o order
				r.json(t, &o)
				if o.OrderID != id || o.SKUID != sku || o.UserID != "buyer" || o.Quantity != 1 {
					t.Errorf("order = %+v; want id %s, sku %d, buyer, 1", o, id, sku)
				}
			}
		})
	}
}

// flip changes one character of an opaque id.
func flip(id string) string {
	b := []byte(id)
	if b[5] == 'A' {
		b[5] = 'B'
	} else {
		b[5] = 'A'
	}
	return string(b)
}

func TestGetSKU(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	starts := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	sku := s.createSKU(t, `{"name":"Sneaker","stock":7,"per_user_limit":2,"starts_at":"2031-01-02T04:04:05+01:00"}`)
	tests := []struct {
		name   string
		id     string
		status int
		code   string
	}{
		{"found", strconv.FormatInt(sku, 10), 200, ""},
		{"not found", "987654321", 404, "sku_not_found"},
		{"zero", "0", 400, "invalid_request"},
		{"negative", "-3", 400, "invalid_request"},
		{"not a number", "x1", 400, "invalid_request"},
		{"beyond int64", "99999999999999999999", 400, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.get(t, "/api/v1/skus/"+tc.id)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("GET /api/v1/skus/%s = %d %q (%s); want %d %q", tc.id, r.status, r.code, r.body, tc.status, tc.code)
			}
			if r.status != http.StatusOK {
				return
			}
			var fields map[string]json.RawMessage
			r.json(t, &fields)
			for _, internal := range []string{"sold", "version", "fence", "total_stock"} {
				if _, ok := fields[internal]; ok {
					t.Errorf("shoppers see %q: %s", internal, r.body)
				}
			}
			var got adminSKU
			r.json(t, &got)
			if got.ID != sku || got.Name != "Sneaker" || got.Stock != 7 || got.PerUserLimit != 2 ||
				got.StartsAt == nil || !got.StartsAt.Equal(starts) || got.EndsAt != nil {
				t.Errorf("sku = %+v; want id %d, Sneaker, stock 7, limit 2, starts %v, no end", got, sku, starts)
			}
		})
	}
}

// TestAdminAuth sends every admin route a set of bad credentials: each is
// refused 401 before the body is looked at, and changes nothing.
func TestAdminAuth(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"a","stock":5}`)
	id := strconv.FormatInt(sku, 10)
	routes := []struct{ method, path, body string }{
		{http.MethodPost, "/admin/v1/skus", `{"name":"intruder","stock":1}`},
		{http.MethodGet, "/admin/v1/skus/" + id, ""},
		{http.MethodPut, "/admin/v1/skus/" + id + "/stock", `{"stock":1000}`},
		{http.MethodGet, "/admin/v1/skus/" + id + "/orders", ""},
		{http.MethodPut, "/admin/v1/skus/" + id + "/stock", `not json`},
		{http.MethodPost, "/admin/v1/skus", strings.Repeat("x", 5000)},
		{http.MethodGet, "/admin/v1/skus/abc", ""},
	}
	creds := []struct {
		name    string
		headers []string
	}{
		{"missing", nil},
		{"empty", []string{"Authorization", ""}},
		{"wrong token", []string{"Authorization", "Bearer " + strings.Repeat("x", len(adminToken))}},
		{"token prefix", []string{"Authorization", "Bearer " + adminToken[:len(adminToken)-1]}},
		{"token plus a character", []string{"Authorization", "Bearer " + adminToken + "x"}},
		{"lowercase bearer", []string{"Authorization", "bearer " + adminToken}},
		{"uppercase bearer", []string{"Authorization", "BEARER " + adminToken}},
		{"two spaces", []string{"Authorization", "Bearer  " + adminToken}},
		{"no scheme", []string{"Authorization", adminToken}},
		{"bearer without token", []string{"Authorization", "Bearer"}},
		{"basic", []string{"Authorization", "Basic " + adminToken}},
		{"token in another header", []string{"X-Admin-Token", adminToken}},
	}
	before := s.state(t, sku)
	var skus int64
	if err := s.db.Raw("SELECT COUNT(*) FROM skus").Row().Scan(&skus); err != nil {
		t.Fatal(err)
	}
	for _, c := range creds {
		for _, rt := range routes {
			t.Run(c.name+" "+rt.method+" "+rt.path, func(t *testing.T) {
				r := s.call(t, rt.method, rt.path, rt.body, c.headers...)
				if r.status != http.StatusUnauthorized || r.code != "unauthorized" {
					t.Fatalf("= %d %q (%s); want 401 unauthorized", r.status, r.code, r.body)
				}
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") {
					t.Errorf("WWW-Authenticate = %q; want a Bearer challenge", got)
				}
				if strings.Contains(string(r.body), adminToken) {
					t.Errorf("the answer holds the token: %s", r.body)
				}
			})
		}
	}
	if after := s.state(t, sku); after != before {
		t.Errorf("refused admin calls changed sku %d: before %+v, after %+v", sku, before, after)
	}
	var skusAfter int64
	if err := s.db.Raw("SELECT COUNT(*) FROM skus").Row().Scan(&skusAfter); err != nil {
		t.Fatal(err)
	}
	if skusAfter != skus {
		t.Errorf("refused admin calls created %d skus", skusAfter-skus)
	}
	// The right token passes on every route.
	if r := s.get(t, "/admin/v1/skus/"+id, bearer...); r.status != http.StatusOK {
		t.Errorf("GET /admin/v1/skus/%s with the token = %d %s; want 200", id, r.status, r.body)
	}
}

func TestAdminCreateSKU(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tests := []struct {
		name    string
		body    string
		status  int
		code    string
		want    adminSKU // checked on 201 (ID ignored)
		msg     string   // a part of the error body
		headers []string
	}{
		{name: "minimal", body: `{"name":"n","stock":5}`, status: 201, want: adminSKU{Name: "n", Stock: 5, PerUserLimit: 1}},
		{name: "zero stock", body: `{"name":"n","stock":0}`, status: 201, want: adminSKU{Name: "n", PerUserLimit: 1}},
		{name: "max stock", body: `{"name":"n","stock":1099511627776}`, status: 201, want: adminSKU{Name: "n", Stock: 1 << 40, PerUserLimit: 1}},
		{name: "with limit", body: `{"name":"n","stock":5,"per_user_limit":4}`, status: 201, want: adminSKU{Name: "n", Stock: 5, PerUserLimit: 4}},
		{name: "200 runes", body: `{"name":"` + strings.Repeat("é", 200) + `","stock":1}`, status: 201, want: adminSKU{Name: strings.Repeat("é", 200), Stock: 1, PerUserLimit: 1}},
		{name: "window", body: `{"name":"n","stock":1,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`, status: 201, want: adminSKU{Name: "n", Stock: 1, PerUserLimit: 1}},
		{name: "null window", body: `{"name":"n","stock":1,"starts_at":null,"ends_at":null}`, status: 201, want: adminSKU{Name: "n", Stock: 1, PerUserLimit: 1}},

		{name: "name missing", body: `{"stock":5}`, status: 400, code: "invalid_request"},
		{name: "name empty", body: `{"name":"","stock":5}`, status: 400, code: "invalid_request"},
		{name: "name blank", body: `{"name":" \t ","stock":5}`, status: 400, code: "invalid_request"},
		{name: "name of 201 runes", body: `{"name":"` + strings.Repeat("é", 201) + `","stock":5}`, status: 400, code: "invalid_request"},
		{name: "name number", body: `{"name":5,"stock":5}`, status: 400, code: "invalid_request"},
		{name: "stock missing", body: `{"name":"n"}`, status: 400, code: "invalid_request"},
		{name: "stock null", body: `{"name":"n","stock":null}`, status: 400, code: "invalid_request"},
		{name: "stock negative", body: `{"name":"n","stock":-1}`, status: 400, code: "invalid_request"},
		{name: "stock above 2^40", body: `{"name":"n","stock":1099511627777}`, status: 400, code: "invalid_request"},
		{name: "stock string", body: `{"name":"n","stock":"5"}`, status: 400, code: "invalid_request"},
		{name: "stock float", body: `{"name":"n","stock":5.5}`, status: 400, code: "invalid_request"},
		{name: "stock beyond int64", body: `{"name":"n","stock":1e30}`, status: 400, code: "invalid_request"},
		{name: "limit zero", body: `{"name":"n","stock":5,"per_user_limit":0}`, status: 400, code: "invalid_request"},
		{name: "limit negative", body: `{"name":"n","stock":5,"per_user_limit":-1}`, status: 400, code: "invalid_request"},
		{name: "limit above 2^30", body: `{"name":"n","stock":5,"per_user_limit":1073741825}`, status: 400, code: "invalid_request"},
		{name: "window reversed", body: `{"name":"n","stock":1,"starts_at":"2030-01-02T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`, status: 400, code: "invalid_request"},
		{name: "window empty", body: `{"name":"n","stock":1,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`, status: 400, code: "invalid_request"},
		{name: "time not RFC 3339", body: `{"name":"n","stock":1,"starts_at":"tomorrow"}`, status: 400, code: "invalid_request", msg: `times must be RFC 3339 strings such as "2030-01-01T10:00:00Z", or null (got "tomorrow")`},
		{name: "time as number", body: `{"name":"n","stock":1,"starts_at":1700000000}`, status: 400, code: "invalid_request", msg: `times must be RFC 3339 strings such as "2030-01-01T10:00:00Z", or null`},
		{name: "unknown field", body: `{"name":"n","stock":1,"price":100}`, status: 400, code: "invalid_request"},
		{name: "read-only field", body: `{"name":"n","stock":1,"sold":3}`, status: 400, code: "invalid_request"},
		{name: "trailing garbage", body: `{"name":"n","stock":1} {}`, status: 400, code: "invalid_request"},
		{name: "malformed", body: `{"name":"n",`, status: 400, code: "invalid_request", msg: "the body is not valid JSON: it ends early"},
		{name: "empty body", body: ``, status: 400, code: "invalid_request"},
		{name: "null body", body: `null`, status: 400, code: "invalid_request", msg: "the body must be a JSON object, not null"},
		{name: "text/plain", body: `{"name":"n","stock":1}`, headers: []string{"Content-Type", "text/plain"}, status: 415, code: "unsupported_media_type"},
		{name: "oversize", body: `{"name":"` + strings.Repeat("n", 4100) + `","stock":1}`, status: 413, code: "request_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.call(t, http.MethodPost, "/admin/v1/skus", tc.body, append(slices.Clone(bearer), tc.headers...)...)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("POST /admin/v1/skus %.80s = %d %q (%s); want %d %q", tc.body, r.status, r.code, r.body, tc.status, tc.code)
			}
			if !strings.Contains(r.msg, tc.msg) {
				t.Errorf("POST /admin/v1/skus answered %s; want its message to say %q", r.body, tc.msg)
			}
			if r.status != http.StatusCreated {
				return
			}
			var got adminSKU
			r.json(t, &got)
			if got.ID < 1 || got.Name != tc.want.Name || got.Stock != tc.want.Stock || got.PerUserLimit != tc.want.PerUserLimit || got.Sold != 0 {
				t.Errorf("created %+v; want %+v", got, tc.want)
			}
			st := s.state(t, got.ID)
			if st.Stock != tc.want.Stock || st.Total != tc.want.Stock || st.Sold != 0 || st.Orders != 0 {
				t.Errorf("stored %+v; want stock = total = %d", st, tc.want.Stock)
			}
			var again adminSKU
			s.get(t, "/admin/v1/skus/"+strconv.FormatInt(got.ID, 10), bearer...).json(t, &again)
			if !sameSKU(again, got) {
				t.Errorf("GET after create = %+v; POST answered %+v", again, got)
			}
		})
	}
}

func sameSKU(a, b adminSKU) bool {
	eqTime := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.ID == b.ID && a.Name == b.Name && a.Stock == b.Stock && a.Sold == b.Sold &&
		a.PerUserLimit == b.PerUserLimit && a.Version == b.Version && eqTime(a.StartsAt, b.StartsAt) && eqTime(a.EndsAt, b.EndsAt)
}

func TestAdminGetSKU(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"adm","stock":4,"per_user_limit":2}`)
	s.buy(t, sku, "u", 2, "")
	tests := []struct {
		name   string
		id     string
		status int
		code   string
	}{
		{"found", strconv.FormatInt(sku, 10), 200, ""},
		{"not found", "987654321", 404, "sku_not_found"},
		{"zero", "0", 400, "invalid_request"},
		{"not a number", "one", 400, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.get(t, "/admin/v1/skus/"+tc.id, bearer...)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("GET /admin/v1/skus/%s = %d %q (%s); want %d %q", tc.id, r.status, r.code, r.body, tc.status, tc.code)
			}
			if r.status != http.StatusOK {
				return
			}
			var got adminSKU
			r.json(t, &got)
			st := s.state(t, sku)
			if got.ID != sku || got.Stock != 2 || got.Sold != 2 || got.Version != st.Version || got.PerUserLimit != 2 {
				t.Errorf("admin sku = %+v; want stock 2, sold 2, version %d", got, st.Version)
			}
		})
	}
}

func TestAdminSetStock(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tests := []struct {
		name   string
		id     string // "" is the case's SKU
		body   string
		status int
		code   string
		stock  int64 // the stock after a 200
	}{
		{name: "raise", body: `{"stock":50}`, status: 200, stock: 50},
		{name: "lower", body: `{"stock":1}`, status: 200, stock: 1},
		{name: "zero", body: `{"stock":0}`, status: 200, stock: 0},
		{name: "max", body: `{"stock":1099511627776}`, status: 200, stock: 1 << 40},
		{name: "negative", body: `{"stock":-1}`, status: 400, code: "invalid_request"},
		{name: "very negative", body: `{"stock":-9223372036854775808}`, status: 400, code: "invalid_request"},
		{name: "above 2^40", body: `{"stock":1099511627777}`, status: 400, code: "invalid_request"},
		{name: "beyond int64", body: `{"stock":9223372036854775808}`, status: 400, code: "invalid_request"},
		{name: "missing", body: `{}`, status: 400, code: "invalid_request"},
		{name: "null", body: `{"stock":null}`, status: 400, code: "invalid_request"},
		{name: "string", body: `{"stock":"5"}`, status: 400, code: "invalid_request"},
		{name: "float", body: `{"stock":5.5}`, status: 400, code: "invalid_request"},
		{name: "bool", body: `{"stock":true}`, status: 400, code: "invalid_request"},
		{name: "unknown field", body: `{"stock":5,"sold":0}`, status: 400, code: "invalid_request"},
		{name: "two objects", body: `{"stock":5}{"stock":6}`, status: 400, code: "invalid_request"},
		{name: "empty body", body: ``, status: 400, code: "invalid_request"},
		{name: "oversize", body: `{"stock":5` + strings.Repeat(" ", 4096) + `}`, status: 413, code: "request_too_large"},
		{name: "sku not found", id: "987654321", body: `{"stock":5}`, status: 404, code: "sku_not_found"},
		{name: "bad id", id: "abc", body: `{"stock":5}`, status: 400, code: "invalid_request"},
		{name: "zero id", id: "0", body: `{"stock":5}`, status: 400, code: "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sku := s.createSKU(t, `{"name":"st","stock":10,"per_user_limit":3}`)
			s.buy(t, sku, "u", 3, "") // sold stays sold
			before := s.state(t, sku)
			id := tc.id
			if id == "" {
				id = strconv.FormatInt(sku, 10)
			}
			r := s.call(t, http.MethodPut, "/admin/v1/skus/"+id+"/stock", tc.body, bearer...)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("PUT stock %.60s = %d %q (%s); want %d %q", tc.body, r.status, r.code, r.body, tc.status, tc.code)
			}
			after := s.state(t, sku)
			if r.status != http.StatusOK {
				if after != before {
					t.Errorf("a %d changed sku %d: before %+v, after %+v", r.status, sku, before, after)
				}
				return
			}
			var got adminSKU
			r.json(t, &got)
			if got.Stock != tc.stock || got.Sold != 3 || after.Stock != tc.stock || after.Sold != 3 ||
				after.Total != tc.stock+3 || after.Version <= before.Version {
				t.Errorf("after PUT stock %d: answer %+v, stored %+v; want stock %d, sold 3, a new version", tc.stock, got, after, tc.stock)
			}
		})
	}
}

// TestRestockAfterSoldOut sells a SKU out, restocks it and buys again: the
// sold-out marks must not outlive the restock.
func TestRestockAfterSoldOut(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"r","stock":2}`)
	s.buy(t, sku, "a", 1, "")
	s.buy(t, sku, "b", 1, "")
	order := func(user string) reply {
		return s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, sku, user))
	}
	// The worker publishes the shared mark after answering the buyer who
	// took the last unit; wait for it, so the restock below comes after it
	// (the other order is a known race, reported).
	s.waitSoldOutMark(t, sku)
	for i := range 3 {
		if r := order("c"); r.status != http.StatusConflict || r.code != "sold_out" {
			t.Fatalf("order %d after selling out = %d %q; want 409 sold_out", i, r.status, r.code)
		}
	}
	soldOut := s.state(t, sku)
	if soldOut.Stock != 0 || soldOut.Sold != 2 {
		t.Fatalf("sold out sku = %+v; want stock 0, sold 2", soldOut)
	}

	r := s.call(t, http.MethodPut, fmt.Sprintf("/admin/v1/skus/%d/stock", sku), `{"stock":1}`, bearer...)
	if r.status != http.StatusOK {
		t.Fatalf("restock = %d %s; want 200", r.status, r.body)
	}
	if r := order("c"); r.status != http.StatusCreated {
		t.Fatalf("order after restock = %d %q (%s); want 201", r.status, r.code, r.body)
	}
	if r := order("d"); r.status != http.StatusConflict || r.code != "sold_out" {
		t.Fatalf("order after the restock sold out = %d %q; want 409 sold_out", r.status, r.code)
	}
	var got adminSKU
	s.get(t, fmt.Sprintf("/admin/v1/skus/%d", sku), bearer...).json(t, &got)
	if got.Stock != 0 || got.Sold != 3 {
		t.Errorf("admin view = %+v; want stock 0, sold 3", got)
	}
	if st := s.state(t, sku); st.Orders != 3 || st.Total != 3 {
		t.Errorf("stored %+v; want 3 orders, total 3", st)
	}
}

// waitSoldOutMark polls (bounded) until the shared sold-out mark of sku is set.
func (s *stack) waitSoldOutMark(t *testing.T, sku int64) {
	t.Helper()
	key := s.prefix + "soldout:{sku:" + strconv.FormatInt(sku, 10) + "}"
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		n, err := s.rdb.Exists(context.Background(), key).Result()
		if err != nil {
			t.Fatalf("redis: %v", err)
		}
		if n == 1 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("sku %d sold out but its shared mark %s was not set within 10s", sku, key)
		}
	}
}

func TestAdminListOrders(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"p","stock":5}`)
	other := s.createSKU(t, `{"name":"q","stock":5}`)
	empty := s.createSKU(t, `{"name":"e","stock":5}`)
	var ids []string
	for i := range 5 {
		s.buy(t, other, fmt.Sprintf("o-%d", i), 1, "") // interleaved orders of another SKU
		ids = append(ids, s.buy(t, sku, fmt.Sprintf("u-%d", i), 1, ""))
	}
	list := func(t *testing.T, id int64, query string) (reply, orderPageJSON) {
		t.Helper()
		r := s.get(t, fmt.Sprintf("/admin/v1/skus/%d/orders%s", id, query), bearer...)
		var p orderPageJSON
		if r.status == http.StatusOK {
			r.json(t, &p)
		}
		return r, p
	}

	t.Run("pages of 2", func(t *testing.T) {
		var got []string
		after := ""
		for page := 0; ; page++ {
			if page > 5 {
				t.Fatal("paging does not end")
			}
			q := "?limit=2"
			if after != "" {
				q += "&after=" + after
			}
			r, p := list(t, sku, q)
			if r.status != http.StatusOK {
				t.Fatalf("page %d = %d %s", page, r.status, r.body)
			}
			if len(p.Orders) > 2 {
				t.Fatalf("page %d has %d orders; limit 2", page, len(p.Orders))
			}
			for _, o := range p.Orders {
				if o.SKUID != sku {
					t.Errorf("page %d holds an order of sku %d", page, o.SKUID)
				}
				got = append(got, o.OrderID)
			}
			if p.NextAfter == nil {
				if len(p.Orders) == 2 {
					t.Errorf("full page %d has next_after null", page)
				}
				break
			}
			if len(p.Orders) != 2 {
				t.Fatalf("page %d of %d orders has next_after %q; want null", page, len(p.Orders), *p.NextAfter)
			}
			after = *p.NextAfter
		}
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Errorf("paged ids %v; want %v (each once, ascending)", got, ids)
		}
	})
	t.Run("default limit", func(t *testing.T) {
		r, p := list(t, sku, "")
		if r.status != http.StatusOK || len(p.Orders) != 5 || p.NextAfter != nil {
			t.Fatalf("= %d %s; want the 5 orders and next_after null", r.status, r.body)
		}
	})
	t.Run("exactly full page", func(t *testing.T) {
		_, p := list(t, sku, "?limit=5")
		if len(p.Orders) != 5 || p.NextAfter == nil || p.Orders[4].OrderID != ids[4] {
			t.Fatalf("limit 5 = %+v; want 5 orders and a next_after", p)
		}
		r, p := list(t, sku, "?limit=5&after="+*p.NextAfter)
		if r.status != http.StatusOK || len(p.Orders) != 0 || p.NextAfter != nil || !strings.Contains(string(r.body), `"orders":[]`) {
			t.Fatalf("after the last = %s; want orders [] and next_after null", r.body)
		}
	})
	t.Run("after skips", func(t *testing.T) {
		_, first := list(t, sku, "?limit=3")
		if len(first.Orders) != 3 || first.NextAfter == nil {
			t.Fatalf("the first 3 = %+v; want 3 orders and a next_after", first)
		}
		_, p := list(t, sku, "?after="+*first.NextAfter)
		if len(p.Orders) != 2 || p.Orders[0].OrderID != ids[3] || p.Orders[1].OrderID != ids[4] {
			t.Fatalf("after the first 3 = %+v; want %v", p.Orders, ids[3:])
		}
	})
	t.Run("no orders", func(t *testing.T) {
		r, p := list(t, empty, "")
		if r.status != http.StatusOK || len(p.Orders) != 0 || p.NextAfter != nil {
			t.Fatalf("= %d %s; want no orders", r.status, r.body)
		}
	})
	t.Run("limit 1000", func(t *testing.T) {
		if r, _ := list(t, sku, "?limit=1000"); r.status != http.StatusOK {
			t.Fatalf("= %d %s; want 200", r.status, r.body)
		}
	})

	bad := []struct {
		name   string
		id     string
		query  string
		status int
		code   string
	}{
		{"limit zero", "", "?limit=0", 400, "invalid_request"},
		{"limit negative", "", "?limit=-1", 400, "invalid_request"},
		{"limit above 1000", "", "?limit=1001", 400, "invalid_request"},
		{"limit huge", "", "?limit=99999999999999999999", 400, "invalid_request"},
		{"limit not a number", "", "?limit=ten", 400, "invalid_request"},
		{"limit float", "", "?limit=2.5", 400, "invalid_request"},
		{"after negative", "", "?after=-1", 400, "invalid_request"},
		{"after not a cursor", "", "?after=last", 400, "invalid_request"},
		{"after a bare id", "", "?after=1", 400, "invalid_request"},
		{"sku not found", "987654321", "", 404, "sku_not_found"},
		{"bad id", "x", "", 400, "invalid_request"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id
			if id == "" {
				id = strconv.FormatInt(sku, 10)
			}
			r := s.get(t, "/admin/v1/skus/"+id+"/orders"+tc.query, bearer...)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("GET orders %s%s = %d %q (%s); want %d %q", id, tc.query, r.status, r.code, r.body, tc.status, tc.code)
			}
		})
	}
}

type orderPageJSON struct {
	Orders    []order `json:"orders"`
	NextAfter *string `json:"next_after"`
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tests := []struct {
		method, path string
		status       int
		code         string
		allow        string // a method the Allow header must list on 405
	}{
		{http.MethodGet, "/", 404, "not_found", ""},
		{http.MethodGet, "/nope", 404, "not_found", ""},
		{http.MethodPost, "/api/v2/orders", 404, "not_found", ""},
		{http.MethodGet, "/api/v1/orders/1/items", 404, "not_found", ""},
		{http.MethodGet, "/admin/v1/users", 404, "not_found", ""},
		{http.MethodDelete, "/api/v1/orders", 405, "method_not_allowed", "POST"},
		{http.MethodPatch, "/api/v1/orders", 405, "method_not_allowed", "GET"},
		{http.MethodPut, "/api/v1/orders/1", 405, "method_not_allowed", "GET"},
		{http.MethodPost, "/api/v1/skus/1", 405, "method_not_allowed", "GET"},
		{http.MethodPost, "/healthz", 405, "method_not_allowed", "GET"},
		{http.MethodDelete, "/admin/v1/skus/1", 405, "method_not_allowed", "GET"},
		{http.MethodPost, "/admin/v1/skus/1/stock", 405, "method_not_allowed", "PUT"},
		{http.MethodGet, "/api/v1/skus/1/", 404, "not_found", ""},
		{http.MethodPost, "/api/v1/orders/", 404, "not_found", ""},
		{http.MethodPut, "/admin/v1/skus/1/stock/", 404, "not_found", ""},
		{http.MethodGet, "/API/v1/skus/1", 404, "not_found", ""},
		{http.MethodGet, "/api/v1//skus/1", 404, "not_found", ""},
		{http.MethodHead, "/admin/v1/skus/1/stock", 405, "method_not_allowed", "PUT"}, // HEAD only where GET is
		{http.MethodGet, "/api/v1/skus/1?a=1&a=2", 400, "invalid_request", ""},
		{http.MethodGet, "/admin/v1/skus/1/orders?limit=1&limit=2", 400, "invalid_request", ""},
		{http.MethodGet, "/admin/v1/skus/1/orders?limit=%zz", 400, "invalid_request", ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			r := s.call(t, tc.method, tc.path, "")
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("= %d %q (%s); want %d %q", r.status, r.code, r.body, tc.status, tc.code)
			}
			if tc.allow != "" && !strings.Contains(r.header.Get("Allow"), tc.allow) {
				t.Errorf("Allow = %q; want it to list %s", r.header.Get("Allow"), tc.allow)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := s.get(t, "/healthz")
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
		t.Errorf(`GET /healthz = %d %s; want 200 {"status":"ok"}`, r.status, r.body)
	}

	down := errors.New("down")
	tests := []struct {
		name         string
		mysql, redis error
		status       int
		want         string
	}{
		{"all up", nil, nil, 200, `{"status":"ok","mysql":"up","redis":"up"}`},
		{"redis down", nil, down, 200, `{"status":"degraded","mysql":"up","redis":"down"}`},
		{"mysql down", down, nil, 503, `{"status":"unavailable","mysql":"down","redis":"up"}`},
		{"both down", down, down, 503, `{"status":"unavailable","mysql":"down","redis":"down"}`},
		{"back up", nil, nil, 200, `{"status":"ok","mysql":"up","redis":"up"}`},
	}
	for _, tc := range tests { // sequential: they share the fake
		t.Run(tc.name, func(t *testing.T) {
			s.ready.set(tc.mysql, tc.redis)
			r := s.get(t, "/readyz")
			if r.status != tc.status || strings.TrimSpace(string(r.body)) != tc.want {
				t.Errorf("GET /readyz = %d %s; want %d %s", r.status, r.body, tc.status, tc.want)
			}
			// Load balancers probe with HEAD: the same status, no body.
			h := s.call(t, http.MethodHead, "/readyz", "")
			if h.status != tc.status || len(h.body) != 0 {
				t.Errorf("HEAD /readyz = %d %q; want %d and no body", h.status, h.body, tc.status)
			}
		})
	}
	if h := s.call(t, http.MethodHead, "/healthz", ""); h.status != http.StatusOK || len(h.body) != 0 {
		t.Errorf("HEAD /healthz = %d %q; want 200 and no body", h.status, h.body)
	}
}

// gatedStore holds every CommitBatch until released, so that a test
// knows which requests sit in the SKU's queue.
type gatedStore struct {
	engine.Committer
	entered chan int // receives the size of each batch as it starts
	release chan struct{}
}

func (g *gatedStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, g.CommitBatch)
}

func (g *gatedStore) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	g.entered <- len(b.Requests)
	select {
	case <-g.release:
	case <-ctx.Done():
		return service.BatchResult{}, ctx.Err()
	}
	return g.Committer.CommitBatch(ctx, b)
}

// TestQueueFull fills a SKU's queue of one while its worker is held in a
// transaction: of two more buyers exactly one is queued and the other is
// told 429 busy with Retry-After at once, and charged nothing.
func TestQueueFull(t *testing.T) {
	t.Parallel()
	gate := &gatedStore{entered: make(chan int, 16), release: make(chan struct{})}
	s := newStack(t, func(o *stackOptions) {
		o.queueMax = 1
		o.commits = func(st engine.Committer) engine.Committer { gate.Committer = st; return gate }
	})
	var once sync.Once
	open := func() { once.Do(func() { close(gate.release) }) }
	t.Cleanup(open)
	sku := s.createSKU(t, `{"name":"busy","stock":10}`)
	before := s.state(t, sku)

	type result struct {
		user string
		r    reply
	}
	results := make(chan result, 3)
	place := func(user string) {
		body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, sku, user)
		results <- result{user, s.call(t, http.MethodPost, "/api/v1/orders", body)}
	}
	wait := func(what string) int {
		select {
		case n := <-gate.entered:
			return n
		case <-time.After(10 * time.Second):
			t.Fatalf("no batch reached the store %s", what)
		}
		return 0
	}

	go place("first")
	if n := wait("for the first buyer"); n != 1 {
		t.Fatalf("first batch holds %d requests; want 1", n)
	}
	// The worker is held in CommitBatch: the queue (capacity 1) is empty.
	go place("second")
	go place("third")
	var busy result
	select {
	case busy = <-results:
	case <-time.After(10 * time.Second):
		t.Fatal("no buyer was refused while the queue was full")
	}
	if busy.r.status != http.StatusTooManyRequests || busy.r.code != "busy" {
		t.Fatalf("%s = %d %q (%s); want 429 busy", busy.user, busy.r.status, busy.r.code, busy.r.body)
	}
	if ra, err := strconv.Atoi(busy.r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After = %q; want a positive number of seconds", busy.r.header.Get("Retry-After"))
	}

	open()
	if n := wait("for the queued buyer"); n != 1 {
		t.Errorf("second batch holds %d requests; want the 1 queued", n)
	}
	for range 2 {
		res := <-results
		if res.r.status != http.StatusCreated {
			t.Errorf("%s = %d %q; want 201", res.user, res.r.status, res.r.code)
		}
	}
	after := s.state(t, sku)
	if after.Sold != before.Sold+2 || after.Orders != 2 {
		t.Errorf("after 2 orders and a 429: %+v; want sold 2, 2 orders", after)
	}
	var charged int64
	if err := s.db.Raw("SELECT COUNT(*) FROM orders WHERE user_id = ?", busy.user).Row().Scan(&charged); err != nil {
		t.Fatal(err)
	}
	if charged != 0 {
		t.Errorf("the refused buyer %s has %d orders; want 0", busy.user, charged)
	}
}

// TestDatabaseDown closes the service's pool: every call that needs the
// database answers 503 unavailable (Retry-After on orders), never 500,
// and nothing is written.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"down","stock":5}`)
	ord := s.buy(t, sku, "u", 1, "")
	before := s.state(t, sku)
	if err := database.Close(s.appDB); err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(sku, 10)
	tests := []struct {
		name, method, path, body string
		headers                  []string
	}{
		{"place order", http.MethodPost, "/api/v1/orders", `{"sku_id":` + id + `,"user_id":"v","quantity":1}`, nil},
		{"place keyed order", http.MethodPost, "/api/v1/orders", `{"sku_id":` + id + `,"user_id":"v","quantity":1}`, []string{"Idempotency-Key", "down-key"}},
		{"get order", http.MethodGet, "/api/v1/orders/" + ord, "", nil},
		{"get sku", http.MethodGet, "/api/v1/skus/" + id, "", nil},
		{"admin get sku", http.MethodGet, "/admin/v1/skus/" + id, "", bearer},
		{"admin create sku", http.MethodPost, "/admin/v1/skus", `{"name":"x","stock":1}`, bearer},
		{"admin set stock", http.MethodPut, "/admin/v1/skus/" + id + "/stock", `{"stock":9}`, bearer},
		{"admin list orders", http.MethodGet, "/admin/v1/skus/" + id + "/orders", "", bearer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := s.call(t, tc.method, tc.path, tc.body, tc.headers...)
			if r.status != http.StatusServiceUnavailable || r.code != "unavailable" {
				t.Fatalf("= %d %q (%s); want 503 unavailable", r.status, r.code, r.body)
			}
			if tc.method == http.MethodPost && tc.path == "/api/v1/orders" && r.header.Get("Retry-After") == "" {
				t.Error("no Retry-After")
			}
			keyed := slices.Contains(tc.headers, "Idempotency-Key")
			if says := strings.Contains(string(r.body), "Idempotency-Key"); says != keyed {
				t.Errorf("503 %s mentions Idempotency-Key = %v; want %v (only when one was sent)", r.body, says, keyed)
			}
		})
	}
	if after := s.state(t, sku); after != before {
		t.Errorf("calls with the database down changed sku %d: before %+v, after %+v", sku, before, after)
	}
	// Requests the handler refuses by itself still get their own answer.
	if r := s.call(t, http.MethodPost, "/api/v1/orders", `{"sku_id":0}`); r.status != http.StatusBadRequest {
		t.Errorf("invalid order with the database down = %d; want 400", r.status)
	}
}

// TestConcurrentBuyers releases more buyers than stock at once through
// HTTP: exactly the stock is sold, everyone else hears sold_out.
func TestConcurrentBuyers(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const stock, buyers = 10, 60
	sku := s.createSKU(t, fmt.Sprintf(`{"name":"rush","stock":%d}`, stock))
	start := make(chan struct{})
	var wg sync.WaitGroup
	statuses := make(chan reply, buyers)
	for i := range buyers {
		wg.Go(func() {
			<-start
			body := fmt.Sprintf(`{"sku_id":%d,"user_id":"rush-%d","quantity":1}`, sku, i)
			statuses <- s.call(t, http.MethodPost, "/api/v1/orders", body, "Idempotency-Key", fmt.Sprintf("rush-%d", i))
		})
	}
	close(start)
	wg.Wait()
	close(statuses)
	created, soldOut := 0, 0
	for r := range statuses {
		switch {
		case r.status == http.StatusCreated:
			created++
		case r.status == http.StatusConflict && r.code == "sold_out":
			soldOut++
		default:
			t.Errorf("buyer = %d %q (%s); want 201 or 409 sold_out", r.status, r.code, r.body)
		}
	}
	if created != stock || soldOut != buyers-stock {
		t.Errorf("created %d, sold out %d; want %d and %d", created, soldOut, stock, buyers-stock)
	}
	if st := s.state(t, sku); st.Stock != 0 || st.Sold != stock || st.Orders != stock {
		t.Errorf("after the rush: %+v; want stock 0, sold %d, %d orders", st, stock, stock)
	}
}

// heldStore commits each batch, then holds its result until released:
// the batch's reads and writes are done, its answers not yet given.
type heldStore struct {
	engine.Committer
	committed chan service.BatchResult
	release   chan struct{}
}

func (h *heldStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, h.CommitBatch)
}

func (h *heldStore) CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error) {
	res, err := h.Committer.CommitBatch(ctx, b)
	h.committed <- res
	<-h.release
	return res, err
}

// TestRestockRacingSoldOutMark restocks a SKU between the commit that
// sold its last unit and that batch's sold-out mark. Once the order flow
// has settled, no mark may say "sold out" of a SKU with stock: every
// instance that reads it refuses buyers without asking the database until
// its sold_out.recheck.
// Marks carry the SKU version, so the late "sold out" loses to the restock.
func TestRestockRacingSoldOutMark(t *testing.T) {
	t.Parallel()
	held := &heldStore{committed: make(chan service.BatchResult, 16), release: make(chan struct{})}
	s := newStack(t, func(o *stackOptions) {
		o.commits = func(st engine.Committer) engine.Committer { held.Committer = st; return held }
	})
	var once sync.Once
	open := func() { once.Do(func() { close(held.release) }) }
	t.Cleanup(open)
	sku := s.createSKU(t, `{"name":"race","stock":1}`)

	first := make(chan reply, 1)
	go func() {
		first <- s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"a","quantity":1}`, sku))
	}()
	select {
	case res := <-held.committed:
		if res.SKU.Stock != 0 {
			t.Fatalf("the batch left stock %d; want 0", res.SKU.Stock)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first order never reached the store")
	}
	// The last unit is committed; its batch has neither answered nor marked.
	if r := s.call(t, http.MethodPut, fmt.Sprintf("/admin/v1/skus/%d/stock", sku), `{"stock":5}`, bearer...); r.status != http.StatusOK {
		t.Fatalf("restock = %d %s", r.status, r.body)
	}
	open()
	if r := <-first; r.status != http.StatusCreated {
		t.Fatalf("first buyer = %d %q; want 201", r.status, r.code)
	}
	// Shutdown waits for the worker: its batch has done all it will do.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.seller.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	key := s.prefix + "soldout:{sku:" + strconv.FormatInt(sku, 10) + "}"
	val, err := s.rdb.Get(ctx, key).Result() // "incarnation:mark"
	if err != nil {
		t.Fatal(err)
	}
	_, m, _ := strings.Cut(val, ":")
	mark, err := strconv.ParseInt(m, 10, 64)
	if err != nil {
		t.Fatalf("shared mark %q: %v", val, err)
	}
	if st := s.state(t, sku); st.Stock > 0 && mark > 0 {
		t.Errorf("sku %d has stock %d but its shared sold-out mark is set (ttl %v): buyers hear sold_out",
			sku, st.Stock, s.rdb.TTL(ctx, key).Val())
	}
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	s := newStack(t, func(o *stackOptions) {
		// One token a minute: the burst is all a key gets during the test.
		o.limits = handler.Limits{PerUserRate: 1.0 / 60, PerUserBurst: 2, PerIPRate: 1.0 / 60, PerIPBurst: 4, MaxKeys: 100}
	})
	sku := s.createSKU(t, `{"name":"limited","stock":100,"per_user_limit":100}`)
	buy := func(user string) reply {
		return s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, sku, user))
	}
	for i, want := range []int{http.StatusCreated, http.StatusCreated, http.StatusTooManyRequests} {
		if r := buy("eager"); r.status != want {
			t.Fatalf("request %d of one user = %d %s; want %d", i+1, r.status, r.body, want)
		} else if want == http.StatusTooManyRequests && (r.code != "rate_limited" || r.header.Get("Retry-After") == "") {
			t.Errorf("over the per-user limit: code %q Retry-After %q; want rate_limited with Retry-After", r.code, r.header.Get("Retry-After"))
		}
	}
	before := s.state(t, sku)
	// Another user still buys, until the IP's burst of 4 is spent.
	if r := buy("patient"); r.status != http.StatusCreated {
		t.Fatalf("another user = %d %s; want 201", r.status, r.body)
	}
	if r := buy("third"); r.status != http.StatusTooManyRequests || r.code != "rate_limited" {
		t.Errorf("over the per-IP limit = %d %q; want 429 rate_limited", r.status, r.code)
	}
	after := s.state(t, sku)
	if after.Sold != before.Sold+1 {
		t.Errorf("sold went %d → %d; want exactly one more (429s charge nothing)", before.Sold, after.Sold)
	}
	// The admin API is not behind the shoppers' per-IP limit.
	if r := s.call(t, http.MethodGet, fmt.Sprintf("/admin/v1/skus/%d", sku), "", bearer...); r.status != http.StatusOK {
		t.Errorf("admin GET after the IP limit = %d; want 200", r.status)
	}
}
