package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
)

// signer is a key of the identity provider.
type signer struct {
	kid    string
	alg    jwkset.ALG
	method jwt.SigningMethod
	key    crypto.Signer
}

func newSigner(t testing.TB, kid string, method jwt.SigningMethod) signer {
	t.Helper()
	var (
		key crypto.Signer
		err error
	)
	switch method {
	case jwt.SigningMethodRS256:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case jwt.SigningMethodES256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: jwkset.ALG(method.Alg()), method: method, key: key}
}

// token signs claims for sub, valid now, with the defaults' audience.
func (s signer) token(t testing.TB, sub string) string {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(s.method, jwt.RegisteredClaims{
		Subject: sub, Audience: jwt.ClaimStrings{"seckill"}, Issuer: "https://idp.test",
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	})
	tok.Header["kid"] = s.kid
	out, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// idp serves a JWK Set that the test swaps, counting fetches.
type idp struct {
	mu      sync.Mutex
	keys    []signer
	fetches atomic.Int64
	fetched chan struct{} // one send per fetch while there is room
}

func (p *idp) set(keys ...signer) { p.mu.Lock(); defer p.mu.Unlock(); p.keys = keys }

func (p *idp) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.fetches.Add(1)
	select {
	case p.fetched <- struct{}{}:
	default:
	}
	p.mu.Lock()
	keys := p.keys
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(jwksJSON(keys))
}

func jwksJSON(keys []signer) []byte {
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg, USE: jwkset.UseSig}})
		if err != nil {
			panic(err)
		}
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	b, _ := json.Marshal(set)
	return b
}

// serveJWKS serves p on loopback and returns a Verifier of its JWK Set
// (the defaults, changed by opt), stopped when the test ends.
func serveJWKS(t *testing.T, p *idp, opt func(*auth.Config)) *auth.Verifier {
	t.Helper()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := defaults()
	cfg.JWKS = srv.URL
	opt(&cfg)
	v, err := auth.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// defaults is auth.Config as internal/config's defaults make it.
func defaults() auth.Config {
	d := config.Default().Auth.JWT
	return auth.Config{
		JWKSRefresh: d.JWKSRefresh, JWKSUnknownKIDInterval: d.JWKSUnknownKIDInterval,
		Issuer: "https://idp.test", Audience: d.Audience, Leeway: d.Leeway, MaxTokenBytes: d.MaxTokenBytes,
		CacheEntries: d.CacheEntries, CacheTTL: d.CacheTTL,
	}
}

func verify(t *testing.T, v *auth.Verifier, tok string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return v.Verify(ctx, tok)
}

func mustVerify(t *testing.T, v *auth.Verifier, tok, want, what string) {
	t.Helper()
	if sub, err := verify(t, v, tok); err != nil || sub != want {
		t.Fatalf("Verify(%s) = %q, %v; want %q", what, sub, err, want)
	}
}

func mustRefuse(t *testing.T, v *auth.Verifier, tok, what string) {
	t.Helper()
	if sub, err := verify(t, v, tok); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("Verify(%s) = %q, %v; want ErrInvalidToken", what, sub, err)
	}
}

// TestJWKSRotation: a JWK Set of two keys on loopback; a key added there
// works at once (an unknown kid fetches the set again), a key removed
// there is refused from that fetch on, without a restart; unknown kids
// fetch at most once per interval, however many arrive.
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	k1 := newSigner(t, "k1", jwt.SigningMethodRS256)
	k2 := newSigner(t, "k2", jwt.SigningMethodES256)
	k3 := newSigner(t, "k3", jwt.SigningMethodEdDSA)
	k4 := newSigner(t, "k4", jwt.SigningMethodES256)
	p := &idp{}
	p.set(k1, k2)
	v := serveJWKS(t, p, func(c *auth.Config) { c.JWKSUnknownKIDInterval = time.Hour }) // one refresh on an unknown kid here
	mustVerify(t, v, k1.token(t, "alice"), "alice", "a k1 token")
	mustVerify(t, v, k2.token(t, "bob"), "bob", "a k2 token")
	if n := p.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after start; want 1", n)
	}

	// Rotate: k3 added, k1 removed. The first k3 token fetches the set.
	p.set(k2, k3)
	mustVerify(t, v, k3.token(t, "carol"), "carol", "a token of the new key k3")
	mustRefuse(t, v, k1.token(t, "alice"), "a token of the removed key k1")
	mustVerify(t, v, k2.token(t, "bob"), "bob", "a k2 token after the rotation")

	// Unknown kids within the interval do not fetch again: k4, published
	// now, is refused until the next refresh, and 50 forged kids cost nothing.
	p.set(k2, k3, k4)
	for range 50 {
		mustRefuse(t, v, k4.token(t, "dave"), "a token of k4 within the unknown-kid interval")
	}
	if n := p.fetches.Load(); n != 2 {
		t.Errorf("%d fetches; want 2 (start, then one for the unknown kid k3)", n)
	}
}

// TestJWKSPeriodicRefresh: with no unknown kid to trigger it, a removed
// key is refused after the configured refresh period.
func TestJWKSPeriodicRefresh(t *testing.T) {
	t.Parallel()
	k1 := newSigner(t, "k1", jwt.SigningMethodES256)
	k2 := newSigner(t, "k2", jwt.SigningMethodES256)
	p := &idp{fetched: make(chan struct{}, 1)}
	p.set(k1, k2)
	v := serveJWKS(t, p, func(c *auth.Config) { c.JWKSRefresh = 20 * time.Millisecond })
	tok := k1.token(t, "alice")
	mustVerify(t, v, tok, "alice", "a k1 token")
	p.set(k2)
	// Refreshes run one after another: once the third fetch after the
	// change has begun, the second (which began after it) has been applied.
	<-p.fetched // drop a signal from before the change, if any
	deadline := time.After(30 * time.Second)
	for range 3 {
		select {
		case <-p.fetched:
		case <-deadline:
			t.Fatalf("no three refreshes within 30s (fetches %d)", p.fetches.Load())
		}
	}
	mustRefuse(t, v, tok, "a k1 token after k1 left the set")
	mustVerify(t, v, k2.token(t, "bob"), "bob", "a k2 token")
}

// TestJWKSFile: a JWK Set in a file, with the key's own algorithm only.
func TestJWKSFile(t *testing.T) {
	t.Parallel()
	k1 := newSigner(t, "k1", jwt.SigningMethodEdDSA)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksJSON([]signer{k1}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := defaults()
	cfg.JWKS = path
	v, err := auth.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	mustVerify(t, v, k1.token(t, "erin"), "erin", "a token of the file's key")
	other := newSigner(t, "k1", jwt.SigningMethodEdDSA) // same kid, another key
	mustRefuse(t, v, other.token(t, "erin"), "a token of another key under the same kid")
}

// TestJWKSUnreachableFailsStart: a JWK Set that cannot be fetched at start
// is a start-up error, not a service that refuses everyone.
func TestJWKSUnreachableFailsStart(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	cfg := defaults()
	cfg.JWKS = srv.URL
	if _, err := auth.New(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("New with a JWKS answering 404 = nil error; want an error")
	}
}

func TestNewRefusesMisconfiguration(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name string
		cfg  auth.Config
	}{
		{"no key", auth.Config{}},
		{"short secret", auth.Config{Secret: []byte("short")}},
		{"secret and jwks", auth.Config{Secret: secret, JWKS: "http://127.0.0.1:1/"}},
		{"secret with RS256", auth.Config{Secret: secret, Algorithms: []string{"RS256"}}},
		{"secret with none", auth.Config{Secret: secret, Algorithms: []string{"none"}}},
		{"missing pem", auth.Config{PublicKeyFile: filepath.Join(t.TempDir(), "nope.pem")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := auth.New(context.Background(), tc.cfg, slog.New(slog.DiscardHandler)); err == nil {
				t.Errorf("New(%s) = nil error; want an error", tc.name)
			}
		})
	}
}
