// Package auth verifies shoppers' bearer tokens (JWTs) against an HS256
// secret, a PEM public key or a JWK Set, and mints HS256 tokens for tests
// and the quick start. The allowed algorithms come from configuration,
// never from the token.
package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// ErrInvalidToken wraps every reason a token is refused. Its text, with
// the reason, is for logs; clients get one stable code.
var ErrInvalidToken = errors.New("auth: invalid token")

// MaxSubjectLen bounds the sub claim: it becomes the order's user_id.
const MaxSubjectLen = 64

// Algorithms lists what may be configured: HMAC ones with a secret, the
// others with public keys.
var Algorithms = []string{"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Symmetric reports whether alg is an HMAC algorithm (needs the secret).
func Symmetric(alg string) bool { return strings.HasPrefix(alg, "HS") }

// Config says how tokens are verified. Exactly one of Secret,
// PublicKeyFile and JWKS is set.
type Config struct {
	// Algorithms a token may be signed with. Empty: HS256 with a secret,
	// the key's own with a PEM file, RS256, ES256 and EdDSA with a JWKS.
	Algorithms    []string
	Secret        []byte // HS* secret, at least 32 bytes
	PublicKeyFile string // PEM: PUBLIC KEY or CERTIFICATE (RSA, ECDSA, Ed25519)
	// JWKS is a JWK Set's http(s) URL or file path, fetched at start
	// (failing start if it cannot be), every JWKSRefresh, and at most
	// once per JWKSUnknownKIDInterval for an unknown kid.
	JWKS                   string
	JWKSRefresh            time.Duration
	JWKSUnknownKIDInterval time.Duration
	JWKSTimeout            time.Duration // one fetch
	Issuer                 string        // required iss when set
	Audience               string        // required aud when set
	Leeway                 time.Duration // clock skew allowed on exp, nbf, iat
	MaxTokenBytes          int           // longer tokens are refused unparsed
	// CacheEntries tokens verified within CacheTTL are answered
	// unverified while still valid and, with a JWKS, while their key
	// stays in the set; 0 for either turns the cache off (tokenCache).
	CacheEntries int
	CacheTTL     time.Duration
}

// Verifier checks tokens. It is safe for concurrent use.
type Verifier struct {
	parser  *jwt.Parser
	keyfunc func(ctx context.Context) jwt.Keyfunc
	max     int
	cache   *tokenCache // nil: off
	hs      *hs256      // nil unless HS256 with a secret may be used
}

// New returns a Verifier. With a JWKS it fetches the set once (ctx bounds
// it) and keeps refreshing it until ctx ends. log receives refresh failures.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Verifier, error) {
	sources := 0
	for _, set := range []bool{len(cfg.Secret) > 0, cfg.PublicKeyFile != "", cfg.JWKS != ""} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return nil, errors.New("auth: exactly one of a secret, a public key file and a JWKS is required")
	}
	v := &Verifier{max: cfg.MaxTokenBytes}
	if v.max <= 0 {
		v.max = 4096
	}
	algs := cfg.Algorithms
	var jwks keyfunc.Keyfunc
	switch {
	case len(cfg.Secret) > 0:
		if len(cfg.Secret) < 32 {
			return nil, errors.New("auth: the HMAC secret must be at least 32 bytes")
		}
		if len(algs) == 0 {
			algs = []string{"HS256"}
		}
		v.keyfunc = fixedKey(slices.Clone(cfg.Secret))
	case cfg.PublicKeyFile != "":
		key, alg, err := readPublicKey(cfg.PublicKeyFile)
		if err != nil {
			return nil, err
		}
		if len(algs) == 0 {
			algs = []string{alg}
		}
		v.keyfunc = fixedKey(key)
	default:
		if len(algs) == 0 {
			algs = []string{"RS256", "ES256", "EdDSA"}
		}
		kf, err := newJWKS(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		v.keyfunc, jwks = kf.KeyfuncCtx, kf
	}
	for _, a := range algs {
		if !slices.Contains(Algorithms, a) {
			return nil, fmt.Errorf("auth: algorithm %q: want one of %s", a, strings.Join(Algorithms, ", "))
		}
		if Symmetric(a) != (len(cfg.Secret) > 0) {
			return nil, fmt.Errorf("auth: algorithm %q does not go with the configured key (HS* need the secret, the others public keys)", a)
		}
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(algs),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	if len(cfg.Secret) > 0 && slices.Contains(algs, "HS256") {
		v.hs = newHS256(slices.Clone(cfg.Secret), opts)
	}
	if cfg.CacheEntries < 0 || cfg.CacheTTL < 0 {
		return nil, errors.New("auth: the verified-token cache's entries and ttl must not be negative")
	}
	v.cache = newTokenCache(cfg.CacheEntries, cfg.CacheTTL, cfg.Leeway, jwks)
	return v, nil
}

// claimsPool holds Verify's claims: nothing keeps them past it (the
// subject is its own string; the cache copies the times).
var claimsPool = sync.Pool{New: func() any { return new(claims) }}

// Verify returns the token's subject, the verified user, or an error
// wrapping ErrInvalidToken. ctx bounds a JWKS refresh for an unknown kid.
func (v *Verifier) Verify(ctx context.Context, token string) (string, error) {
	if len(token) > v.max {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrInvalidToken, v.max)
	}
	var now time.Time
	var key uint64
	if v.cache != nil {
		now, key = time.Now(), v.cache.key(token)
		if sub, ok := v.cache.get(ctx, key, token, now); ok {
			return sub, nil
		}
	}
	c := claimsPool.Get().(*claims) // escapes into the Validator and golang-jwt: pooled, not allocated per token
	defer func() {
		*c = claims{}
		claimsPool.Put(c)
	}()
	if v.hs != nil {
		if handled, err := v.hs.verify(token, c); handled {
			if err != nil {
				return "", err
			}
			sub, err := subject(c)
			if err == nil && v.cache != nil && v.cache.again(key) {
				v.cache.put(key, token, c, now, verified{})
			}
			return sub, err
		}
	}
	if v.cache == nil {
		return v.verify(token, c, v.keyfunc(ctx))
	}
	var used verified
	kf := v.keyfunc(ctx)
	if v.cache.jwks != nil { // keep which key of the set verified it
		inner := kf
		kf = func(t *jwt.Token) (any, error) {
			k, err := inner(t)
			used.kid, _ = t.Header["kid"].(string)
			used.key = k
			return k, err
		}
	}
	sub, err := v.verify(token, c, kf)
	if err != nil {
		return "", err
	}
	if v.cache.jwks != nil && !v.cache.keyOf(ctx, &used) {
		return sub, nil // no kid (the whole set was tried): not cached
	}
	v.cache.put(key, token, c, now, used)
	return sub, nil
}

// verify parses and verifies token into c with kf, with golang-jwt.
func (v *Verifier) verify(token string, c *claims, kf jwt.Keyfunc) (string, error) {
	if _, err := v.parser.ParseWithClaims(token, c, kf); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return subject(c)
}

// subject is the verified user of a token whose claims c are valid.
func subject(c *claims) (string, error) {
	switch sub := c.Subject; {
	case sub == "":
		return "", fmt.Errorf("%w: no sub claim", ErrInvalidToken)
	case len(sub) > MaxSubjectLen:
		return "", fmt.Errorf("%w: sub longer than %d bytes", ErrInvalidToken, MaxSubjectLen)
	default:
		return sub, nil
	}
}

// fixedKey returns the keyfunc of one key, built once: a closure or an
// interface conversion per token would be an allocation per order.
func fixedKey(key any) func(context.Context) jwt.Keyfunc {
	kf := func(*jwt.Token) (any, error) { return key, nil }
	return func(context.Context) jwt.Keyfunc { return kf }
}

func readPublicKey(path string) (crypto.PublicKey, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("auth: public key: %w", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, "", fmt.Errorf("auth: public key %s: no PEM block", path)
	}
	var key any
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		return nil, "", fmt.Errorf("auth: public key %s: PEM block %q; want PUBLIC KEY or CERTIFICATE", path, block.Type)
	}
	if err != nil {
		return nil, "", fmt.Errorf("auth: public key %s: %w", path, err)
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		return k, "RS256", nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return k, "ES256", nil
		case elliptic.P384():
			return k, "ES384", nil
		case elliptic.P521():
			return k, "ES512", nil
		}
	case ed25519.PublicKey:
		return k, "EdDSA", nil
	}
	return nil, "", fmt.Errorf("auth: public key %s: unsupported key type %T", path, key)
}

// Claims are what Mint signs.
type Claims struct {
	Subject  string
	Issuer   string // omitted when empty
	Audience string // omitted when empty
	TTL      time.Duration
}

// Mint returns an HS256 token for c signed with secret: for tests, load
// tests and the quick start. Real shoppers get theirs from the identity
// provider.
func Mint(secret []byte, c Claims, now time.Time) (string, error) {
	rc := jwt.RegisteredClaims{
		Subject:   c.Subject,
		Issuer:    c.Issuer,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(c.TTL)),
	}
	if c.Audience != "" {
		rc.Audience = jwt.ClaimStrings{c.Audience}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, rc).SignedString(secret)
}
