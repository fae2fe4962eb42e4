package handler_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

const (
	testIssuer = "https://idp.test"
	testSecret = "test-shopper-secret-0123456789abcdef" // 36 bytes
)

// verifierConfig is the production defaults of auth.jwt with an issuer.
func verifierConfig() auth.Config {
	d := config.Default().Auth.JWT
	return auth.Config{
		JWKSRefresh: d.JWKSRefresh, JWKSUnknownKIDInterval: d.JWKSUnknownKIDInterval,
		Issuer: testIssuer, Audience: d.Audience, Leeway: d.Leeway, MaxTokenBytes: d.MaxTokenBytes,
		CacheEntries: d.CacheEntries, CacheTTL: d.CacheTTL,
	}
}

// withVerifier serves the stack with auth.shopper jwt over cfg.
func withVerifier(t *testing.T, cfg auth.Config) func(*stackOptions) {
	t.Helper()
	v, err := auth.New(context.Background(), cfg, testenv.Logger())
	if err != nil {
		t.Fatal(err)
	}
	return func(o *stackOptions) { o.auth = handler.ShopperAuth{Shoppers: v} }
}

// withHS256 serves the stack with auth.shopper jwt over the test secret.
func withHS256(t *testing.T) func(*stackOptions) {
	t.Helper()
	cfg := verifierConfig()
	cfg.Secret = []byte(testSecret)
	return withVerifier(t, cfg)
}

// claims are good claims for sub: the configured issuer and audience, valid now.
func claims(sub string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"sub": sub, "iss": testIssuer, "aud": "seckill",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

func sign(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// hs mints an HS256 token for sub under the test secret.
func hs(t *testing.T, sub string) string {
	t.Helper()
	return sign(t, jwt.SigningMethodHS256, []byte(testSecret), claims(sub))
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	c[k] = v
	return c
}

func without(c jwt.MapClaims, k string) jwt.MapClaims {
	delete(c, k)
	return c
}

// TestHostileShopperTokens: with auth.shopper jwt over an RSA public key
// (production defaults otherwise), every token that is not a good one is
// answered 401 with a stable code and changes nothing; a good token whose
// sub is not the body's user_id is answered 403.
func TestHostileShopperTokens(t *testing.T) {
	t.Parallel()
	idpKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&idpKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	pemPath := filepath.Join(t.TempDir(), "idp.pem")
	if err := os.WriteFile(pemPath, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := verifierConfig()
	cfg.PublicKeyFile = pemPath
	s := newStack(t, withVerifier(t, cfg))
	sku := s.createSKU(t, `{"name":"guarded","stock":10,"per_user_limit":5}`)

	rs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodRS256, idpKey, c) }
	good := rs(claims("u-1"))
	now := time.Now()
	unsigned := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("u-1"))
	header, payload, _ := strings.Cut(good, ".")
	payload, _, _ = strings.Cut(payload, ".")

	body := fmt.Sprintf(`{"sku_id":%d,"user_id":"u-1","quantity":1}`, sku)
	bearerOf := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	tests := []struct {
		name    string
		path    string
		headers []string
		status  int
		code    string
	}{
		{name: "no token", status: 401, code: "unauthorized"},
		{name: "empty bearer", headers: []string{"Authorization", "Bearer "}, status: 401, code: "invalid_token"},
		{name: "basic scheme", headers: []string{"Authorization", "Basic dTpw"}, status: 401, code: "invalid_token"},
		{name: "malformed", headers: bearerOf("not.a.jwt"), status: 401, code: "invalid_token"},
		{name: "two segments", headers: bearerOf(header + "." + payload), status: 401, code: "invalid_token"},
		{name: "alg none", headers: bearerOf(unsigned), status: 401, code: "invalid_token"},
		{name: "alg none, signature kept", headers: bearerOf(strings.Join([]string{strings.Split(unsigned, ".")[0], payload, strings.Split(good, ".")[2]}, ".")), status: 401, code: "invalid_token"},
		{name: "wrong signature", headers: bearerOf(sign(t, jwt.SigningMethodRS256, otherKey, claims("u-1"))), status: 401, code: "invalid_token"},
		{name: "payload swapped", headers: bearerOf(header + "." + strings.Split(rs(claims("u-2")), ".")[1] + "." + strings.Split(good, ".")[2]), status: 401, code: "invalid_token"},
		{name: "HS256 keyed with the RSA public key (key confusion)", headers: bearerOf(sign(t, jwt.SigningMethodHS256, pubPEM, claims("u-1"))), status: 401, code: "invalid_token"},
		{name: "RS512 (not configured)", headers: bearerOf(sign(t, jwt.SigningMethodRS512, idpKey, claims("u-1"))), status: 401, code: "invalid_token"},
		{name: "expired beyond the leeway", headers: bearerOf(rs(with(claims("u-1"), "exp", now.Add(-2*time.Minute).Unix()))), status: 401, code: "invalid_token"},
		{name: "not yet valid beyond the leeway", headers: bearerOf(rs(with(claims("u-1"), "nbf", now.Add(2*time.Minute).Unix()))), status: 401, code: "invalid_token"},
		{name: "issued in the future", headers: bearerOf(rs(with(claims("u-1"), "iat", now.Add(10*time.Minute).Unix()))), status: 401, code: "invalid_token"},
		{name: "no exp", headers: bearerOf(rs(without(claims("u-1"), "exp"))), status: 401, code: "invalid_token"},
		{name: "wrong issuer", headers: bearerOf(rs(with(claims("u-1"), "iss", "https://evil.test"))), status: 401, code: "invalid_token"},
		{name: "no issuer", headers: bearerOf(rs(without(claims("u-1"), "iss"))), status: 401, code: "invalid_token"},
		{name: "wrong audience", headers: bearerOf(rs(with(claims("u-1"), "aud", "another-service"))), status: 401, code: "invalid_token"},
		{name: "no audience", headers: bearerOf(rs(without(claims("u-1"), "aud"))), status: 401, code: "invalid_token"},
		{name: "missing sub", headers: bearerOf(rs(without(claims("u-1"), "sub"))), status: 401, code: "invalid_token"},
		{name: "empty sub", headers: bearerOf(rs(with(claims("u-1"), "sub", ""))), status: 401, code: "invalid_token"},
		{name: "sub longer than a user_id", headers: bearerOf(rs(claims(strings.Repeat("u", 65)))), status: 401, code: "invalid_token"},
		{name: "sub with a trailing space", headers: bearerOf(rs(claims("u-1 "))), status: 400, code: "invalid_subject"},
		{name: "sub with a leading space", headers: bearerOf(rs(claims(" u-1"))), status: 400, code: "invalid_subject"},
		{name: "sub with a control character", headers: bearerOf(rs(claims("u-1\x00"))), status: 400, code: "invalid_subject"},
		{name: "oversized (validly signed)", headers: bearerOf(rs(with(claims("u-1"), "pad", strings.Repeat("x", 4096)))), status: 401, code: "invalid_token"},
		{name: "token in the query string", path: "?access_token=" + good, status: 401, code: "invalid_token"},
		{name: "token in the query and the header", path: "?access_token=" + good, headers: bearerOf(good), status: 401, code: "invalid_token"},
		{name: "two Authorization headers", headers: append(bearerOf(good), bearerOf(good)...), status: 401, code: "invalid_token"},
		{name: "good token, another user_id", headers: bearerOf(rs(claims("u-2"))), status: 403, code: "user_mismatch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.state(t, sku)
			r := s.call(t, http.MethodPost, "/api/v1/orders"+tc.path, body, tc.headers...)
			if r.status != tc.status || r.code != tc.code {
				t.Fatalf("POST = %d %q (%s); want %d %q", r.status, r.code, r.body, tc.status, tc.code)
			}
			if tc.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("WWW-Authenticate = %q; want a Bearer challenge", r.header.Get("WWW-Authenticate"))
			}
			if after := s.state(t, sku); after != before {
				t.Errorf("a %d changed sku %d: before %+v, after %+v", r.status, sku, before, after)
			}
		})
	}

	// The good token buys, as its sub, with or without the body's user_id.
	for _, b := range []string{body, fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku)} {
		r := s.call(t, http.MethodPost, "/api/v1/orders", b, bearerOf(good)...)
		var o order
		if r.status == http.StatusCreated {
			r.json(t, &o)
		}
		if r.status != http.StatusCreated || o.UserID != "u-1" {
			t.Fatalf("POST %s with a good token = %d %s; want 201 for u-1", b, r.status, r.body)
		}
	}
	if st := s.state(t, sku); st.Sold != 2 || st.Orders != 2 {
		t.Errorf("after the hostile table and two good orders: %+v; want sold 2 in 2 orders", st)
	}
}

// TestOneShopperManyTokens: the per-user limit holds for the verified
// user however many tokens it holds, and one token cannot buy for a
// thousand body user_ids.
func TestOneShopperManyTokens(t *testing.T) {
	t.Parallel()
	s := newStack(t, withHS256(t))
	sku := s.createSKU(t, `{"name":"scalped","stock":50,"per_user_limit":2}`)

	const tokens = 20
	start := make(chan struct{})
	var wg sync.WaitGroup
	statuses := make([]reply, tokens)
	for i := range tokens {
		tok := sign(t, jwt.SigningMethodHS256, []byte(testSecret), with(claims("scalper"), "jti", strconv.Itoa(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i] = s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku), "Authorization", "Bearer "+tok)
		}()
	}
	close(start)
	wg.Wait()
	created, limited := 0, 0
	for _, r := range statuses {
		switch {
		case r.status == http.StatusCreated:
			created++
		case r.status == http.StatusConflict && r.code == "limit_exceeded":
			limited++
		default:
			t.Errorf("a scalper token = %d %q (%s); want 201 or 409 limit_exceeded", r.status, r.code, r.body)
		}
	}
	if created != 2 || limited != tokens-2 {
		t.Errorf("%d tokens of one user: %d created, %d limit_exceeded; want 2 and %d", tokens, created, limited, tokens-2)
	}

	before := s.state(t, sku)
	tok := hs(t, "scalper")
	for i := range 1000 {
		r := s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"sock-%d","quantity":1}`, sku, i), "Authorization", "Bearer "+tok)
		if r.status != http.StatusForbidden || r.code != "user_mismatch" {
			t.Fatalf("body user_id sock-%d under the scalper's token = %d %q; want 403 user_mismatch", i, r.status, r.code)
		}
	}
	if after := s.state(t, sku); after != before || after.Sold != 2 {
		t.Errorf("1000 invented user_ids changed sku %d: before %+v, after %+v", sku, before, after)
	}
	var held int64
	if err := s.db.Raw("SELECT COALESCE(SUM(quantity), 0) FROM user_purchases WHERE sku_id = ? AND user_id = 'scalper'", sku).Row().Scan(&held); err != nil || held != 2 {
		t.Errorf("scalper holds %d (%v); want 2, the limit", held, err)
	}
}

// TestPerUserRateLimitKeysOnVerifiedUser: the per-user rate limit counts
// the token's sub, so fresh tokens of one user share one bucket and
// another user is not held back by it.
func TestPerUserRateLimitKeysOnVerifiedUser(t *testing.T) {
	t.Parallel()
	s := newStack(t, withHS256(t), func(o *stackOptions) {
		o.limits = handler.Limits{PerUserRate: 0.001, PerUserBurst: 3, MaxKeys: 100} // no refill within the test
	})
	sku := s.createSKU(t, `{"name":"rated","stock":100,"per_user_limit":100}`)
	buy := func(tok string) reply {
		return s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku), "Authorization", "Bearer "+tok)
	}
	for i := range 3 {
		if r := buy(sign(t, jwt.SigningMethodHS256, []byte(testSecret), with(claims("fast"), "jti", strconv.Itoa(i)))); r.status != http.StatusCreated {
			t.Fatalf("order %d of fast = %d %s; want 201 within the burst", i, r.status, r.body)
		}
	}
	if r := buy(sign(t, jwt.SigningMethodHS256, []byte(testSecret), with(claims("fast"), "jti", "fresh"))); r.status != http.StatusTooManyRequests || r.code != "rate_limited" {
		t.Errorf("a fresh token of fast past the burst = %d %q; want 429 rate_limited", r.status, r.code)
	}
	if r := buy(hs(t, "slow")); r.status != http.StatusCreated {
		t.Errorf("another user = %d %s; want 201", r.status, r.body)
	}
	if st := s.state(t, sku); st.Sold != 4 {
		t.Errorf("sold %d; want 4", st.Sold)
	}
}

// TestOrdersArePrivate: the buyer sees their order and their list;
// another user and an anonymous client get the 404 of a missing order;
// ids reveal no sequence.
func TestOrdersArePrivate(t *testing.T) {
	t.Parallel()
	s := newStack(t, withHS256(t))
	sku := s.createSKU(t, `{"name":"private","stock":100,"per_user_limit":20}`)
	alice, bob := hs(t, "alice"), hs(t, "bob")
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

	const n = 12
	var ids []string
	for range n {
		r := s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku), as(alice)...)
		if r.status != http.StatusCreated {
			t.Fatalf("alice buys = %d %s", r.status, r.body)
		}
		var o order
		r.json(t, &o)
		ids = append(ids, o.OrderID)
	}
	s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku), as(bob)...)

	// Ids reveal no count: not numbers, not in creation order, no shared prefix.
	for i, id := range ids {
		if _, err := strconv.ParseInt(id, 10, 64); err == nil {
			t.Errorf("order id %q is a number", id)
		}
		if i > 0 && id[:3] == ids[i-1][:3] {
			t.Errorf("consecutive ids %q and %q share a prefix", ids[i-1], id)
		}
	}
	if sort.StringsAreSorted(ids) {
		t.Errorf("%d consecutive order ids sort in creation order: %v", n, ids)
	}

	for _, tc := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"the buyer", as(alice), 200},
		{"another user", as(bob), 404},
		{"anonymous", nil, 404},
		{"an invalid token", as(alice + "x"), 401},
	} {
		r := s.get(t, "/api/v1/orders/"+ids[0], tc.headers...)
		if r.status != tc.status {
			t.Errorf("GET alice's order as %s = %d %s; want %d", tc.name, r.status, r.body, tc.status)
		}
		if tc.status == 404 && r.code != "not_found" {
			t.Errorf("GET alice's order as %s: code %q; want not_found, as for a missing order", tc.name, r.code)
		}
	}
	if r := s.get(t, "/api/v1/orders/"+flip(ids[0]), as(alice)...); r.status != 404 || r.code != "not_found" {
		t.Errorf("GET a made-up id = %d %q; want 404 not_found", r.status, r.code)
	}

	// Alice's list, in pages of 5, is her orders in order; bob sees his one.
	var got []string
	after := ""
	for page := 0; ; page++ {
		if page > n {
			t.Fatal("paging does not end")
		}
		q := "?limit=5"
		if after != "" {
			q += "&after=" + after
		}
		r := s.get(t, "/api/v1/orders"+q, as(alice)...)
		if r.status != 200 {
			t.Fatalf("alice's page %d = %d %s", page, r.status, r.body)
		}
		var p struct {
			Orders    []order `json:"orders"`
			NextAfter *string `json:"next_after"`
		}
		r.json(t, &p)
		for _, o := range p.Orders {
			if o.UserID != "alice" {
				t.Errorf("alice's list holds an order of %q", o.UserID)
			}
			got = append(got, o.OrderID)
		}
		if p.NextAfter == nil {
			break
		}
		after = *p.NextAfter
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("alice's list = %v; want her %d orders in order %v", got, n, ids)
	}
	r := s.get(t, "/api/v1/orders", as(bob)...)
	if r.status != 200 || strings.Count(string(r.body), `"order_id"`) != 1 || !strings.Contains(string(r.body), `"user_id":"bob"`) {
		t.Errorf("bob's list = %d %s; want his one order", r.status, r.body)
	}
	for _, tc := range []struct {
		name, query string
		headers     []string
		status      int
		code        string
	}{
		{"anonymous", "", nil, 401, "unauthorized"},
		{"limit 0", "?limit=0", as(alice), 400, "invalid_request"},
		{"limit 101", "?limit=101", as(alice), 400, "invalid_request"},
		{"numeric cursor", "?after=3", as(alice), 400, "invalid_request"},
		{"forged cursor", "?after=" + flip(ids[0]), as(alice), 400, "invalid_request"},
	} {
		if r := s.get(t, "/api/v1/orders"+tc.query, tc.headers...); r.status != tc.status || r.code != tc.code {
			t.Errorf("GET /api/v1/orders%s as %s = %d %q; want %d %q", tc.query, tc.name, r.status, r.code, tc.status, tc.code)
		}
	}
}

// TestNoneKeepsTheBodyUser: auth.shopper none trusts the body's user_id
// (required), reads orders by opaque id alone and has no "my orders".
func TestNoneKeepsTheBodyUser(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"open","stock":5}`)
	if r := s.call(t, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku)); r.status != 400 || r.code != "invalid_request" {
		t.Errorf("no user_id with none = %d %q; want 400 invalid_request", r.status, r.code)
	}
	id := s.buy(t, sku, "anyone", 1, "")
	if r := s.get(t, "/api/v1/orders/"+id); r.status != 200 {
		t.Errorf("GET by opaque id with none = %d; want 200", r.status)
	}
	if r := s.get(t, "/api/v1/orders"); r.status != 401 || r.code != "unauthorized" {
		t.Errorf("GET /api/v1/orders with none = %d %q; want 401 unauthorized", r.status, r.code)
	}
}

// TestAdminTokenRotation: a comma-separated admin token list accepts
// each of its tokens (old and new, during a rotation) and nothing else.
func TestAdminTokenRotation(t *testing.T) {
	t.Parallel()
	const old, next = "old-admin-token-0123456789", "new-admin-token-9876543210"
	s := newStack(t, func(o *stackOptions) { o.admin = old + ", " + next })
	for _, tc := range []struct {
		name, token string
		admitted    bool
	}{
		{"the old token", old, true},
		{"the new token", next, true},
		{"the whole list", old + ", " + next, false},
		{"a prefix of one", old[:16], false},
		{"the test default", adminToken, false},
		{"empty", "", false},
	} {
		// No SKU 1: an admitted call reaches the handler and gets its 404.
		r := s.get(t, "/admin/v1/skus/1", "Authorization", "Bearer "+tc.token)
		want, code := http.StatusUnauthorized, "unauthorized"
		if tc.admitted {
			want, code = http.StatusNotFound, "sku_not_found"
		}
		if r.status != want || r.code != code {
			t.Errorf("admin call with %s = %d %q; want %d %q", tc.name, r.status, r.code, want, code)
		}
	}
}
