package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/metrics"
	"github.com/seckill/seckill/service"
)

// contract holds real answers of the service to handler/openapi.yaml with
// kin-openapi's validator, and records which documented (operation,
// status) pairs and error codes the answers covered.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	server *url.URL // the document's server: requests are routed as if sent there

	mu    sync.Mutex
	seen  map[string]int // "METHOD /path/{id} status" → answers
	codes map[string]int // error code → answers
}

// Outside any operation: an unknown path and a known path with another
// method (documented in info.description).
const (
	unroutedPath   = "* unrouted 404"
	unroutedMethod = "* unrouted 405"
)

func newContract(t *testing.T) *contract {
	t.Helper()
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		t.Fatalf("kin-openapi cannot load openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	// Every answer carries X-Request-ID: each response says so, required,
	// or the validator would not hold the service to it.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, r := range op.Responses.Map() {
				if h := r.Value.Headers["X-Request-ID"]; h == nil || !h.Value.Required {
					t.Errorf("openapi.yaml: %s %s %s does not declare a required X-Request-ID header", method, path, status)
				}
			}
		}
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	server, err := url.Parse(doc.Servers[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	return &contract{doc: doc, router: router, server: server, seen: map[string]int{}, codes: map[string]int{}}
}

// attach makes every request of s's client validated, request and answer.
func (c *contract) attach(t *testing.T, s *stack) {
	next := s.client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	s.client.Transport = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		c.check(t, req, resp, raw)
		return resp, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// check validates one request/answer pair and records what it covered.
func (c *contract) check(t *testing.T, req *http.Request, resp *http.Response, raw []byte) {
	t.Helper()
	for _, err := range c.validate(req, resp, raw) {
		t.Errorf("%s %s = %d %.300s\n%v", req.Method, req.URL.RequestURI(), resp.StatusCode, raw, err)
	}
}

// validate holds one answer to the document and returns what breaks it;
// what it covered is recorded.
func (c *contract) validate(req *http.Request, resp *http.Response, raw []byte) []error {
	ctx := context.Background()
	vreq := req.Clone(ctx)
	vreq.URL.Scheme, vreq.URL.Host, vreq.Host = c.server.Scheme, c.server.Host, c.server.Host
	vreq.Body = http.NoBody
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return []error{err}
		}
		vreq.Body = body
	}
	if code := errorCode(raw); resp.StatusCode >= 400 && code != "" {
		c.record(c.codes, code)
	}

	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		return c.checkUnrouted(err, resp, raw)
	}
	var errs []error
	// `default` is the 500 of a bug: no answer may fall back to it.
	if route.Operation.Responses.Status(resp.StatusCode) == nil {
		errs = append(errs, fmt.Errorf("status %d is not documented for %s %s", resp.StatusCode, req.Method, route.Path))
	}
	in := &openapi3filter.RequestValidationInput{
		Request:    vreq,
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{MultiError: true, AuthenticationFunc: adminBearerAuth},
	}
	// The document refusing a request the service accepted is a contract
	// break too (the other way round is not: the service checks more).
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && resp.StatusCode < 400 {
		errs = append(errs, fmt.Errorf("answered, but the document refuses the request: %w", err))
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(raw)),
		Options:                &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		errs = append(errs, fmt.Errorf("the answer does not match openapi.yaml: %w", err))
	}
	if len(errs) == 0 {
		c.record(c.seen, req.Method+" "+route.Path+" "+strconv.Itoa(resp.StatusCode))
	}
	return errs
}

// adminBearerAuth checks credentials as the document states them:
// adminBearer is the admin token. shopperBearer is the service's to judge:
// with auth.shopper none there is no token, with jwt a bad one is a 401.
func adminBearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	switch in.SecuritySchemeName {
	case "adminBearer":
		if in.RequestValidationInput.Request.Header.Get("Authorization") != "Bearer "+adminToken {
			return errors.New("no valid admin bearer token")
		}
		return nil
	case "shopperBearer":
		return nil
	case "paymentBearer":
		if in.RequestValidationInput.Request.Header.Get("Authorization") != "Bearer "+paymentToken {
			return errors.New("no valid payment bearer token")
		}
		return nil
	}
	return fmt.Errorf("security scheme %q: teach adminBearerAuth to check it", in.SecuritySchemeName)
}

// checkUnrouted holds an answer outside every operation to what
// info.description promises: 404 not_found or 405 method_not_allowed with
// Allow, an Error body, X-Request-ID.
func (c *contract) checkUnrouted(routeErr error, resp *http.Response, raw []byte) []error {
	want, code, key := http.StatusNotFound, "not_found", unroutedPath
	var errs []error
	if errors.Is(routeErr, routers.ErrMethodNotAllowed) {
		want, code, key = http.StatusMethodNotAllowed, "method_not_allowed", unroutedMethod
		if resp.Header.Get("Allow") == "" {
			errs = append(errs, errors.New("405 without an Allow header"))
		}
	} else if !errors.Is(routeErr, routers.ErrPathNotFound) {
		return []error{routeErr}
	}
	if resp.StatusCode != want {
		errs = append(errs, fmt.Errorf("status %d; want %d (%w)", resp.StatusCode, want, routeErr))
	}
	if resp.Header.Get("X-Request-ID") == "" {
		errs = append(errs, errors.New("no X-Request-ID"))
	}
	var body any
	if err := json.Unmarshal(raw, &body); err != nil {
		errs = append(errs, fmt.Errorf("not JSON: %w", err))
	} else if err := c.doc.Components.Schemas["Error"].Value.VisitJSON(body); err != nil {
		errs = append(errs, fmt.Errorf("not an Error: %w", err))
	}
	if got := errorCode(raw); got != code {
		errs = append(errs, fmt.Errorf("code %q; want %q", got, code))
	}
	if len(errs) == 0 {
		c.record(c.seen, key)
	}
	return errs
}

func errorCode(raw []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e) // a non-error body has no code
	return e.Error.Code
}

func (c *contract) record(m map[string]int, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m[key]++
}

// requireCoverage fails for every documented (operation, status) pair and
// every error code no answer covered. Only `internal` (a bug) is exempt.
func (c *contract) requireCoverage(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := []string{unroutedPath, unroutedMethod}
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if status != "default" {
					want = append(want, method+" "+path+" "+status)
				}
			}
		}
	}
	sort.Strings(want)
	for _, k := range want {
		if c.seen[k] == 0 {
			t.Errorf("documented but never answered: %s", k)
		}
	}
	for _, code := range c.doc.Components.Schemas["ErrorCode"].Value.Enum {
		if code == "internal" {
			continue
		}
		if c.codes[code.(string)] == 0 {
			t.Errorf("error code %q documented but never answered", code)
		}
	}
	t.Logf("%d documented (operation, status) pairs, %d answers validated", len(want), sumCounts(c.seen))
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// contractCase is one request; {name} in path, body and header values is
// replaced by the fixture of that name.
type contractCase struct {
	method, path, body string
	headers            []string
	status             int
	code               string // the error code, for 4xx/5xx
}

func (s *stack) run(t *testing.T, fixtures *strings.Replacer, cases []contractCase) {
	t.Helper()
	for _, tc := range cases {
		path, body := fixtures.Replace(tc.path), fixtures.Replace(tc.body)
		headers := slices.Clone(tc.headers)
		for i := range headers {
			headers[i] = fixtures.Replace(headers[i])
		}
		r := s.call(t, tc.method, path, body, headers...)
		if r.status != tc.status || r.code != tc.code {
			t.Errorf("%s %s %.80s = %d %q (%.200s); want %d %q", tc.method, path, body, r.status, r.code, r.body, tc.status, tc.code)
		}
	}
}

// TestContract drives every route of the running API (real MariaDB and
// Redis) into every status handler/openapi.yaml documents for it and
// validates each request/answer pair with kin-openapi: status, headers
// (X-Request-ID, Retry-After, Location, WWW-Authenticate are required
// where documented) and body schema. It fails on any mismatch and on any
// documented pair or error code no answer covered: a new route or status
// in the document needs a case here.
func TestContract(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	m := metrics.New()
	s := newStack(t, func(o *stackOptions) {
		o.extra = map[string]http.Handler{"/metrics": m.Handler()}
		o.waitlistMax = 3
	})
	c.attach(t, s)

	sku := s.createSKU(t, `{"name":"contract","stock":10,"per_user_limit":3}`)
	last := s.createSKU(t, `{"name":"last one","stock":1,"per_user_limit":5}`)
	gone := s.createSKU(t, `{"name":"gone","stock":1}`)
	s.buy(t, gone, "early", 1, "")
	later := s.createSKU(t, fmt.Sprintf(`{"name":"later","stock":5,"starts_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	ord := s.buy(t, sku, "u-1", 1, "contract-key")
	toCancel, toPay, toExpire := s.buy(t, sku, "u-8", 1, ""), s.buy(t, sku, "u-9", 1, ""), s.buy(t, sku, "u-10", 1, "")
	// toExpire's payment window closes: the buyer never paid.
	if err := s.db.Exec("UPDATE orders SET expires_at = ? WHERE user_id = 'u-10'", time.Now().UTC().Add(-time.Second)).Error; err != nil {
		t.Fatal(err)
	}
	// The waitlist (order.waitlist_max 3): a sold-out SKU with two waiting,
	// the first of whom will lapse.
	wl := s.createSKU(t, `{"name":"waitlist","stock":1,"per_user_limit":3}`)
	s.buy(t, wl, "early", 1, "")
	toLapse := s.wait(t, wl, "w-0", 1, "", 0).OrderID
	waiting := s.wait(t, wl, "w-1", 1, "", 1).OrderID
	if err := s.db.Exec("UPDATE orders SET expires_at = ? WHERE user_id = 'w-0'", time.Now().UTC().Add(-time.Second)).Error; err != nil {
		t.Fatal(err) // its sale's end, as the sweeper will find it
	}
	fx := strings.NewReplacer(
		"{toCancel}", toCancel, "{toPay}", toPay, "{toExpire}", toExpire,
		"{sku}", strconv.FormatInt(sku, 10),
		"{last}", strconv.FormatInt(last, 10),
		"{gone}", strconv.FormatInt(gone, 10),
		"{later}", strconv.FormatInt(later, 10),
		"{order}", ord, "{orderTag}", s.get(t, "/api/v1/orders/"+ord).header.Get("ETag"),
		"{wl}", strconv.FormatInt(wl, 10),
		"{waiting}", waiting, "{toLapse}", toLapse,
		"{big}", strings.Repeat("x", 5000),
	)
	auth := bearer
	payAuth := []string{"Authorization", "Bearer " + paymentToken}
	badAuth := []string{"Authorization", "Bearer wrong"}
	text := []string{"Content-Type", "text/plain"}
	const dup = "?x=1&x=2"
	buy := func(sku, user string, qty int) string {
		return fmt.Sprintf(`{"sku_id":%s,"user_id":%q,"quantity":%d}`, sku, user, qty)
	}
	wait := func(sku, user string, qty int) string {
		return fmt.Sprintf(`{"sku_id":%s,"user_id":%q,"quantity":%d,"wait":true}`, sku, user, qty)
	}

	s.run(t, fx, []contractCase{
		{method: "GET", path: "/healthz", status: 200},
		{method: "HEAD", path: "/healthz", status: 200},
		{method: "GET", path: "/healthz" + dup, status: 400, code: "invalid_request"},
		{method: "HEAD", path: "/healthz" + dup, status: 400},
		{method: "GET", path: "/readyz", status: 200},
		{method: "HEAD", path: "/readyz", status: 200},
		{method: "GET", path: "/readyz" + dup, status: 400, code: "invalid_request"},
		{method: "HEAD", path: "/readyz" + dup, status: 400},
		{method: "GET", path: "/admin/v1/readyz", headers: auth, status: 200},
		{method: "GET", path: "/admin/v1/readyz", status: 401, code: "unauthorized"},
		{method: "GET", path: "/admin/v1/readyz" + dup, headers: auth, status: 400, code: "invalid_request"},
		{method: "GET", path: "/openapi.yaml", status: 200},
		{method: "GET", path: "/openapi.yaml" + dup, status: 400, code: "invalid_request"},
		{method: "GET", path: "/metrics", status: 200},
		{method: "GET", path: "/metrics" + dup, status: 400, code: "invalid_request"},
		{method: "GET", path: "/nowhere", status: 404, code: "not_found"},
		{method: "GET", path: "/api/v1/skus/{sku}/", status: 404, code: "not_found"},
		{method: "DELETE", path: "/api/v1/orders", status: 405, code: "method_not_allowed"},

		{method: "POST", path: "/api/v1/orders", body: buy("{sku}", "u-2", 1), status: 201},
		{method: "POST", path: "/api/v1/orders", body: buy("{sku}", "u-1", 1), headers: []string{"Idempotency-Key", "contract-key"}, status: 200},
		{method: "POST", path: "/api/v1/orders", body: buy("{sku}", "u-1", 0), status: 400, code: "invalid_request"},
		{method: "POST", path: "/api/v1/orders", body: buy("999999999", "u-1", 1), status: 404, code: "sku_not_found"},
		{method: "POST", path: "/api/v1/orders", body: buy("{gone}", "u-3", 1), status: 409, code: "sold_out"},
		{method: "POST", path: "/api/v1/orders", body: buy("{last}", "u-3", 2), status: 409, code: "insufficient_stock"},
		{method: "POST", path: "/api/v1/orders", body: buy("{sku}", "u-4", 4), status: 409, code: "limit_exceeded"},
		{method: "POST", path: "/api/v1/orders", body: buy("{later}", "u-3", 1), status: 409, code: "sale_not_active"},
		{method: "POST", path: "/api/v1/orders", body: buy("{sku}", "u-1", 2), headers: []string{"Idempotency-Key", "contract-key"}, status: 409, code: "idempotency_conflict"},
		{method: "POST", path: "/api/v1/orders", body: `{"sku_id":{sku},"user_id":"{big}","quantity":1}`, status: 413, code: "request_too_large"},
		{method: "POST", path: "/api/v1/orders", body: buy("{sku}", "u-6", 1), headers: text, status: 415, code: "unsupported_media_type"},
		{method: "POST", path: "/api/v1/orders", body: wait("{wl}", "w-2", 1), headers: []string{"Idempotency-Key", "wait-key"}, status: 202},
		{method: "POST", path: "/api/v1/orders", body: wait("{wl}", "w-2", 1), headers: []string{"Idempotency-Key", "wait-key"}, status: 200},
		{method: "POST", path: "/api/v1/orders", body: wait("{wl}", "w-2", 1), status: 409, code: "already_waiting"},
		{method: "POST", path: "/api/v1/orders", body: wait("{wl}", "w-3", 1), status: 409, code: "waitlist_full"},
		{method: "POST", path: "/api/v1/orders", body: `{"sku_id":{wl},"user_id":"w-4","quantity":1,"wait":"yes"}`, status: 400, code: "invalid_request"},
		{method: "POST", path: "/api/v1/orders", body: `{"sku_id":{wl},"user_id":"w-4","quantity":1,"wait":1}`, status: 400, code: "invalid_request"},
		{method: "POST", path: "/api/v1/orders", body: `{"sku_id":{wl},"user_id":"w-4","quantity":1,"wait":null}`, status: 409, code: "sold_out"},
		{method: "POST", path: "/internal/v1/orders/{waiting}/paid", headers: payAuth, status: 409, code: "order_waiting"},
		{method: "GET", path: "/api/v1/orders/{waiting}", status: 200},

		{method: "GET", path: "/api/v1/orders/{order}", status: 200},
		{method: "GET", path: "/api/v1/orders/{order}", headers: []string{"If-None-Match", "{orderTag}"}, status: 304},
		{method: "GET", path: "/api/v1/orders/{order}", headers: []string{"If-None-Match", "{orderTag}", "Prefer", "wait=1"}, status: 304},
		{method: "GET", path: "/api/v1/orders/{order}", headers: []string{"If-None-Match", `"pending-stale"`, "Prefer", "wait=30"}, status: 200},
		{method: "GET", path: "/api/v1/orders/AAAAAAAAAAAAAAAAAAAAAA", status: 404, code: "not_found"},

		{method: "POST", path: "/api/v1/orders/{toCancel}/cancel", status: 200},
		{method: "POST", path: "/api/v1/orders/{toCancel}/cancel", status: 200},
		{method: "POST", path: "/api/v1/orders/AAAAAAAAAAAAAAAAAAAAAA/cancel", status: 404, code: "not_found"},
		{method: "POST", path: "/internal/v1/orders/{toPay}/paid", headers: payAuth, status: 200},
		{method: "POST", path: "/internal/v1/orders/{toPay}/paid", headers: payAuth, status: 200},
		{method: "POST", path: "/internal/v1/orders/{toPay}/paid", headers: auth, status: 401, code: "unauthorized"},
		{method: "POST", path: "/internal/v1/orders/AAAAAAAAAAAAAAAAAAAAAA/paid", headers: payAuth, status: 404, code: "not_found"},
		{method: "POST", path: "/api/v1/orders/{toPay}/cancel", status: 409, code: "order_paid"},
		{method: "POST", path: "/internal/v1/orders/{toCancel}/paid", headers: payAuth, status: 409, code: "order_cancelled"},
		{method: "POST", path: "/internal/v1/orders/{toExpire}/paid", headers: payAuth, status: 409, code: "order_expired"},

		{method: "GET", path: "/api/v1/skus?limit=2", status: 200},
		{method: "GET", path: "/api/v1/skus?limit=101", status: 400, code: "invalid_request"},
		{method: "GET", path: "/api/v1/skus/{sku}", status: 200},
		{method: "GET", path: "/api/v1/skus/0", status: 400, code: "invalid_request"},
		{method: "GET", path: "/api/v1/skus/999999999", status: 404, code: "sku_not_found"},

		{method: "GET", path: "/admin/v1/skus?limit=2", headers: auth, status: 200},
		{method: "GET", path: "/admin/v1/skus?limit=0", headers: auth, status: 400, code: "invalid_request"},
		{method: "GET", path: "/admin/v1/skus", headers: badAuth, status: 401, code: "unauthorized"},

		{method: "POST", path: "/admin/v1/skus", body: `{"name":"new","stock":3}`, headers: auth, status: 201},
		{method: "POST", path: "/admin/v1/skus", body: `{"name":"","stock":3}`, headers: auth, status: 400, code: "invalid_request"},
		{method: "POST", path: "/admin/v1/skus", body: `{"name":"new","stock":3}`, status: 401, code: "unauthorized"},
		{method: "POST", path: "/admin/v1/skus", body: `{"name":"{big}","stock":3}`, headers: auth, status: 413, code: "request_too_large"},
		{method: "POST", path: "/admin/v1/skus", body: `{"name":"new","stock":3}`, headers: append(slices.Clone(auth), text...), status: 415, code: "unsupported_media_type"},

		{method: "GET", path: "/admin/v1/skus/{sku}", headers: auth, status: 200},
		{method: "GET", path: "/admin/v1/skus/x", headers: auth, status: 400, code: "invalid_request"},
		{method: "GET", path: "/admin/v1/skus/{sku}", headers: badAuth, status: 401, code: "unauthorized"},
		{method: "GET", path: "/admin/v1/skus/999999999", headers: auth, status: 404, code: "sku_not_found"},

		{method: "PATCH", path: "/admin/v1/skus/{sku}", body: `{"name":"renamed"}`, headers: auth, status: 200},
		{method: "PATCH", path: "/admin/v1/skus/{sku}", body: `{}`, headers: auth, status: 400, code: "invalid_request"},
		{method: "PATCH", path: "/admin/v1/skus/{sku}", body: `{"name":"x"}`, status: 401, code: "unauthorized"},
		{method: "PATCH", path: "/admin/v1/skus/999999999", body: `{"name":"x"}`, headers: auth, status: 404, code: "sku_not_found"},
		{method: "PATCH", path: "/admin/v1/skus/{sku}", body: `{"name":"{big}"}`, headers: auth, status: 413, code: "request_too_large"},
		{method: "PATCH", path: "/admin/v1/skus/{sku}", body: `{"name":"x"}`, headers: append(slices.Clone(auth), text...), status: 415, code: "unsupported_media_type"},

		{method: "PUT", path: "/admin/v1/skus/{sku}/stock", body: `{"stock":20}`, headers: auth, status: 200},
		{method: "PUT", path: "/admin/v1/skus/{sku}/stock", body: `{"stock":-1}`, headers: auth, status: 400, code: "invalid_request"},
		{method: "PUT", path: "/admin/v1/skus/{sku}/stock", body: `{"stock":20}`, headers: badAuth, status: 401, code: "unauthorized"},
		{method: "PUT", path: "/admin/v1/skus/999999999/stock", body: `{"stock":20}`, headers: auth, status: 404, code: "sku_not_found"},
		{method: "PUT", path: "/admin/v1/skus/{sku}/stock", body: `{"stock":20,"pad":"{big}"}`, headers: auth, status: 413, code: "request_too_large"},
		{method: "PUT", path: "/admin/v1/skus/{sku}/stock", body: `{"stock":20}`, headers: append(slices.Clone(auth), text...), status: 415, code: "unsupported_media_type"},

		{method: "GET", path: "/admin/v1/skus/{sku}/orders?limit=1", headers: auth, status: 200},
		{method: "GET", path: "/admin/v1/skus/{sku}/orders?limit=1001", headers: auth, status: 400, code: "invalid_request"},
		{method: "GET", path: "/admin/v1/skus/{sku}/orders", status: 401, code: "unauthorized"},
		{method: "GET", path: "/admin/v1/skus/999999999/orders", headers: auth, status: 404, code: "sku_not_found"},

		{method: "GET", path: "/admin/v1/skus/{sku}/lock", headers: auth, status: 200},
		{method: "GET", path: "/admin/v1/skus/x/lock", headers: auth, status: 400, code: "invalid_request"},
		{method: "GET", path: "/admin/v1/skus/{sku}/lock", status: 401, code: "unauthorized"},
		{method: "GET", path: "/admin/v1/skus/999999999/lock", headers: auth, status: 404, code: "sku_not_found"},
	})

	// The sweeper expires toExpire and lapses toLapse: a cancel now finds
	// them so. A waiting order cancelled leaves the line.
	if ex, err := s.sweeper.SweepOnce(context.Background(), 0); err != nil || ex.Orders != 1 || ex.Lapsed != 1 {
		t.Fatalf("SweepOnce = %+v, %v; want the one due order expired, the one waiter lapsed", ex, err)
	}
	s.run(t, fx, []contractCase{
		{method: "POST", path: "/api/v1/orders/{toExpire}/cancel", status: 409, code: "order_expired"},
		{method: "POST", path: "/internal/v1/orders/{toExpire}/paid", headers: payAuth, status: 409, code: "order_expired"},
		{method: "POST", path: "/api/v1/orders/{toLapse}/cancel", status: 409, code: "order_lapsed"},
		{method: "POST", path: "/internal/v1/orders/{toLapse}/paid", headers: payAuth, status: 409, code: "order_lapsed"},
		{method: "POST", path: "/api/v1/orders/{waiting}/cancel", status: 200},
	})

	t.Run("shopper jwt", func(t *testing.T) { contractShopperJWT(t, c) })
	t.Run("busy", func(t *testing.T) { contractBusy(t, c) })
	t.Run("rate limited", func(t *testing.T) { contractRateLimited(t, c) })
	t.Run("outcome unknown", func(t *testing.T) { contractOutcomeUnknown(t, c) })
	t.Run("lock store down", func(t *testing.T) { contractLockStoreDown(t, c) })

	// The database goes away: every route that needs it answers 503.
	s.ready.set(errors.New("down"), nil)
	if err := database.Close(s.appDB); err != nil {
		t.Fatal(err)
	}
	s.run(t, fx, []contractCase{
		{method: "GET", path: "/readyz", status: 503},
		{method: "HEAD", path: "/readyz", status: 503},
		{method: "POST", path: "/api/v1/orders", body: buy("{sku}", "u-7", 1), status: 503, code: "unavailable"},
		{method: "GET", path: "/api/v1/orders/{order}", status: 503, code: "unavailable"},
		{method: "POST", path: "/api/v1/orders/{order}/cancel", status: 503, code: "unavailable"},
		{method: "POST", path: "/internal/v1/orders/{order}/paid", headers: payAuth, status: 503, code: "unavailable"},
		{method: "GET", path: "/api/v1/skus/{sku}", status: 503, code: "unavailable"},
		{method: "GET", path: "/api/v1/skus", status: 503, code: "unavailable"},
		{method: "GET", path: "/admin/v1/skus", headers: auth, status: 503, code: "unavailable"},
		{method: "POST", path: "/admin/v1/skus", body: `{"name":"new","stock":3}`, headers: auth, status: 503, code: "unavailable"},
		{method: "GET", path: "/admin/v1/skus/{sku}", headers: auth, status: 503, code: "unavailable"},
		{method: "PATCH", path: "/admin/v1/skus/{sku}", body: `{"name":"x"}`, headers: auth, status: 503, code: "unavailable"},
		{method: "PUT", path: "/admin/v1/skus/{sku}/stock", body: `{"stock":20}`, headers: auth, status: 503, code: "unavailable"},
		{method: "GET", path: "/admin/v1/skus/{sku}/orders", headers: auth, status: 503, code: "unavailable"},
		// The lock store still answers: the lock is shown.
		{method: "GET", path: "/admin/v1/skus/{sku}/lock", headers: auth, status: 200},
	})

	c.requireCoverage(t)
}

// contractShopperJWT serves with auth.shopper jwt: the shopper's own
// orders, a missing or refused token, another user's user_id, and the
// shopper routes with the database gone.
func contractShopperJWT(t *testing.T, c *contract) {
	s := newStack(t, withHS256(t))
	c.attach(t, s)
	sku := s.createSKU(t, `{"name":"jwt","stock":10,"per_user_limit":5}`)
	alice := []string{"Authorization", "Bearer " + hs(t, "alice")}
	refused := []string{"Authorization", "Bearer not-a-token"}
	// A verified sub that differs from alice's only by a trailing space
	// names nobody: the database compares ids byte for byte, as Go does.
	spaced := []string{"Authorization", "Bearer " + hs(t, "alice ")}
	fx := strings.NewReplacer("{sku}", strconv.FormatInt(sku, 10))
	s.run(t, fx, []contractCase{
		{method: "POST", path: "/api/v1/orders", body: `{"sku_id":{sku},"quantity":1}`, headers: alice, status: 201},
		{method: "POST", path: "/api/v1/orders", body: `{"sku_id":{sku},"quantity":1}`, status: 401, code: "unauthorized"},
		{method: "POST", path: "/api/v1/orders", body: `{"sku_id":{sku},"user_id":"bob","quantity":1}`, headers: alice, status: 403, code: "user_mismatch"},
		{method: "GET", path: "/api/v1/orders?limit=5", headers: alice, status: 200},
		{method: "GET", path: "/api/v1/orders?limit=0", headers: alice, status: 400, code: "invalid_request"},
		{method: "GET", path: "/api/v1/orders", status: 401, code: "unauthorized"},
		{method: "GET", path: "/api/v1/orders/AAAAAAAAAAAAAAAAAAAAAA", headers: refused, status: 401, code: "invalid_token"},
		{method: "POST", path: "/api/v1/orders/AAAAAAAAAAAAAAAAAAAAAA/cancel", status: 401, code: "unauthorized"},
		{method: "POST", path: "/api/v1/orders", body: `{"sku_id":{sku},"quantity":1}`, headers: spaced, status: 400, code: "invalid_subject"},
		{method: "GET", path: "/api/v1/orders", headers: spaced, status: 400, code: "invalid_subject"},
		{method: "GET", path: "/api/v1/orders/AAAAAAAAAAAAAAAAAAAAAA", headers: spaced, status: 400, code: "invalid_subject"},
		{method: "POST", path: "/api/v1/orders/AAAAAAAAAAAAAAAAAAAAAA/cancel", headers: spaced, status: 400, code: "invalid_subject"},
	})
	if err := database.Close(s.appDB); err != nil {
		t.Fatal(err)
	}
	s.run(t, fx, []contractCase{
		{method: "GET", path: "/api/v1/orders", headers: alice, status: 503, code: "unavailable"},
	})
}

// contractBusy fills a SKU's queue of one while its worker is held in a
// transaction, so the next buyer hears 429 busy.
func contractBusy(t *testing.T, c *contract) {
	gate := &gatedStore{entered: make(chan int, 16), release: make(chan struct{})}
	s := newStack(t, func(o *stackOptions) {
		o.queueMax = 1
		o.commits = func(st engine.Committer) engine.Committer { gate.Committer = st; return gate }
	})
	c.attach(t, s)
	var once sync.Once
	open := func() { once.Do(func() { close(gate.release) }) }
	t.Cleanup(open)
	sku := s.createSKU(t, `{"name":"busy","stock":10}`)

	results := make(chan reply, 3)
	place := func(user string) {
		results <- s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, sku, user))
	}
	go place("first")
	select {
	case <-gate.entered: // the worker is held; the queue (1) is empty
	case <-time.After(10 * time.Second):
		t.Fatal("no batch reached the store")
	}
	go place("second")
	go place("third")
	var refused reply
	select {
	case refused = <-results:
	case <-time.After(10 * time.Second):
		t.Fatal("no buyer was refused while the queue was full")
	}
	open()
	for range 2 {
		<-results
	}
	if refused.status != http.StatusTooManyRequests || refused.code != "busy" {
		t.Errorf("a buyer beyond the queue = %d %q; want 429 busy", refused.status, refused.code)
	}
}

// contractRateLimited gives each user a burst of one order an hour and
// the client IP a burst of two requests.
func contractRateLimited(t *testing.T, c *contract) {
	s := newStack(t, func(o *stackOptions) {
		o.limits = handler.Limits{PerUserRate: 1.0 / 3600, PerUserBurst: 1, PerIPRate: 1.0 / 3600, PerIPBurst: 2, MaxKeys: 100}
	})
	c.attach(t, s)
	sku := s.createSKU(t, `{"name":"limited","stock":10,"per_user_limit":5}`)
	body := fmt.Sprintf(`{"sku_id":%d,"user_id":"eager","quantity":1}`, sku)
	if r := s.call(t, http.MethodPost, "/api/v1/orders", body); r.status != http.StatusCreated {
		t.Fatalf("first order = %d %s; want 201", r.status, r.body)
	}
	if r := s.call(t, http.MethodPost, "/api/v1/orders", body); r.status != http.StatusTooManyRequests || r.code != "rate_limited" {
		t.Errorf("second order within the burst = %d %q; want 429 rate_limited", r.status, r.code)
	}
	// The client IP's burst of 2 is spent.
	if r := s.call(t, http.MethodGet, "/api/v1/orders", ""); r.status != http.StatusTooManyRequests || r.code != "rate_limited" {
		t.Errorf("a third request from one IP = %d %q; want 429 rate_limited", r.status, r.code)
	}
}

// contractOutcomeUnknown makes every batch commit fail as if COMMIT's
// answer was lost.
func contractOutcomeUnknown(t *testing.T, c *contract) {
	s := newStack(t, func(o *stackOptions) {
		o.commits = func(st engine.Committer) engine.Committer { return &unknownStore{st} }
	})
	c.attach(t, s)
	sku := s.createSKU(t, `{"name":"unknown","stock":10}`)
	r := s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"u","quantity":1}`, sku), "Idempotency-Key", "unknown-1")
	if r.status != http.StatusServiceUnavailable || r.code != "outcome_unknown" {
		t.Errorf("an order whose COMMIT answer was lost = %d %q (%s); want 503 outcome_unknown", r.status, r.code, r.body)
	}
}

// unknownStore fails every batch commit with service.ErrOutcomeUnknown.
type unknownStore struct{ engine.Committer }

func (u *unknownStore) CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error) {
	return service.OneByOne(ctx, bs, u.CommitBatch)
}

func (u *unknownStore) CommitBatch(context.Context, service.Batch) (service.BatchResult, error) {
	return service.BatchResult{}, fmt.Errorf("%w: COMMIT lost (injected)", service.ErrOutcomeUnknown)
}

// TestContractCatches feeds the validator of TestContract answers that
// break the document in one way each: every one must be caught, and the
// unbroken one must pass.
func TestContractCatches(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	const (
		sku   = `{"id":1,"name":"a","stock":1,"per_user_limit":1,"starts_at":null,"ends_at":null}`
		order = `{"order_id":1,"sku_id":1,"user_id":"u","quantity":1,"created_at":"2026-11-11T00:00:00Z"}`
		busy  = `{"error":{"code":"busy","message":"retry"}}`
	)
	id := []string{"X-Request-ID", "r-1"}
	jsonCT := []string{"Content-Type", "application/json; charset=utf-8"}
	hdr := func(kv ...[]string) http.Header {
		h := http.Header{}
		for _, p := range kv {
			h.Add(p[0], p[1])
		}
		return h
	}
	tests := []struct {
		name, method, path, reqBody string
		reqHeader                   http.Header
		status                      int
		header                      http.Header
		body                        string
		ok                          bool
	}{
		{"a good answer", "GET", "/api/v1/skus/1", "", nil, 200, hdr(id, jsonCT), sku, true},
		{"no X-Request-ID", "GET", "/api/v1/skus/1", "", nil, 200, hdr(jsonCT), sku, false},
		{"a required field missing", "GET", "/api/v1/skus/1", "", nil, 200, hdr(id, jsonCT), `{"id":1,"name":"a","per_user_limit":1,"starts_at":null,"ends_at":null}`, false},
		{"a field of the wrong type", "GET", "/api/v1/skus/1", "", nil, 200, hdr(id, jsonCT), strings.Replace(sku, `"stock":1`, `"stock":"1"`, 1), false},
		{"not JSON", "GET", "/api/v1/skus/1", "", nil, 200, hdr(id, []string{"Content-Type", "text/html"}), "<p>hi</p>", false},
		{"an undocumented status", "GET", "/api/v1/skus/1", "", nil, 418, hdr(id, jsonCT), busy, false},
		{"429 without Retry-After", "POST", "/api/v1/orders", `{"sku_id":1,"user_id":"u","quantity":1}`, nil, 429, hdr(id, jsonCT), busy, false},
		{"429 with a Retry-After of 0", "POST", "/api/v1/orders", `{"sku_id":1,"user_id":"u","quantity":1}`, nil, 429, hdr(id, jsonCT, []string{"Retry-After", "0"}), busy, false},
		{"an undocumented error code", "POST", "/api/v1/orders", `{"sku_id":1,"user_id":"u","quantity":1}`, nil, 429, hdr(id, jsonCT, []string{"Retry-After", "1"}), `{"error":{"code":"oops","message":"x"}}`, false},
		{"201 without Location", "POST", "/api/v1/orders", `{"sku_id":1,"user_id":"u","quantity":1}`, nil, 201, hdr(id, jsonCT), order, false},
		{"201 to a request the document refuses", "POST", "/api/v1/orders", `{"sku_id":1,"user_id":"u","quantity":0}`, nil, 201, hdr(id, jsonCT, []string{"Location", "/api/v1/orders/1"}), order, false},
		{"401 without WWW-Authenticate", "GET", "/admin/v1/skus/1", "", nil, 401, hdr(id, jsonCT), `{"error":{"code":"unauthorized","message":"x"}}`, false},
		{"an unknown path answered with HTML", "GET", "/nowhere", "", nil, 404, hdr(id, []string{"Content-Type", "text/html"}), "<p>404</p>", false},
		{"405 without Allow", "DELETE", "/api/v1/orders", "", nil, 405, hdr(id, jsonCT), `{"error":{"code":"method_not_allowed","message":"x"}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.reqBody != "" {
				body = strings.NewReader(tc.reqBody)
			}
			req, err := http.NewRequest(tc.method, "http://127.0.0.1:1"+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reqBody != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if strings.HasPrefix(tc.path, "/admin/") {
				req.Header.Set("Authorization", "Bearer "+adminToken)
			}
			resp := &http.Response{StatusCode: tc.status, Header: tc.header}
			errs := c.validate(req, resp, []byte(tc.body))
			if tc.ok && len(errs) > 0 {
				t.Errorf("a good answer was refused: %v", errs)
			}
			if !tc.ok && len(errs) == 0 {
				t.Error("the broken answer passed")
			}
		})
	}
}

// contractLockStoreDown: a lock store that cannot be read answers 503.
func contractLockStoreDown(t *testing.T, c *contract) {
	s := newStack(t, func(o *stackOptions) { o.locks = downLocks{} })
	c.attach(t, s)
	sku := s.createSKU(t, `{"name":"lockless","stock":1}`)
	fx := strings.NewReplacer("{sku}", strconv.FormatInt(sku, 10))
	s.run(t, fx, []contractCase{
		{method: "GET", path: "/admin/v1/skus/{sku}/lock", headers: []string{"Authorization", "Bearer " + adminToken}, status: 503, code: "unavailable"},
	})
}

type downLocks struct{}

func (downLocks) InspectLock(context.Context, string) (service.LockState, error) {
	return service.LockState{}, service.ErrUnavailable
}
