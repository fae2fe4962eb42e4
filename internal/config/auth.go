package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/orderid"
)

// Shopper authentication modes.
const (
	ShopperJWT  = "jwt"  // Authorization: Bearer <JWT>; the user is its sub
	ShopperNone = "none" // the body's user_id is trusted: trusted networks and load tests only
)

// Auth configures who shoppers are and how order ids look to clients.
type Auth struct {
	Shopper string `yaml:"shopper" default:"jwt" valid:"jwt|none" help:"jwt (Authorization: Bearer <JWT>, the user is its sub) or none (the body's user_id is trusted: trusted networks and load tests only)"`
	// OrderIDKey: every instance needs the same; changing it makes earlier
	// ids unreadable.
	OrderIDKey string `yaml:"order_id_key" secret:"true" help:"AES key (32, 48 or 64 hex digits) encrypting the order ids clients see; required with a DSN, generated in the quick start"`
	JWT        JWT    `yaml:"jwt"`
	// PaymentTokens: the payment system confirms payments on /internal/v1.
	PaymentTokens string `yaml:"payment_tokens" secret:"true" help:"the payment system's bearer tokens, comma-separated, at least 16 characters each, never logged; none refuses every confirmation"`
}

// JWT configures the verification of shopper tokens: exactly one of
// Secret, PublicKeyFile and JWKS (the quick start generates a secret).
type JWT struct {
	Algorithms    []string      `yaml:"algorithms" help:"algorithms a token may use, never taken from the token; none: HS256 with a secret, the PEM key's own, RS256, ES256 and EdDSA with a JWKS"`
	Secret        string        `yaml:"secret" secret:"true" help:"HS256 secret, at least 32 bytes"`
	PublicKeyFile string        `yaml:"public_key_file" help:"PEM public key or certificate (RSA, ECDSA, Ed25519)"`
	JWKS          string        `yaml:"jwks" help:"JWK Set URL (http, https) or file, fetched at start (start fails if it cannot be)"`
	JWKSRefresh   time.Duration `yaml:"jwks_refresh" default:"5m" valid:">0" help:"how often the JWK Set is fetched again: a key removed there is refused here after at most this"`
	// JWKSUnknownKIDInterval: new keys work at once, without a flood.
	JWKSUnknownKIDInterval time.Duration `yaml:"jwks_unknown_kid_interval" default:"30s" valid:">0" help:"a token naming an unknown kid fetches the set again at most this often"`
	Issuer                 string        `yaml:"issuer" help:"required iss; none: not checked"`
	Audience               string        `yaml:"audience" default:"seckill" help:"required aud"`
	Leeway                 time.Duration `yaml:"leeway" default:"30s" valid:"0s..5m" help:"clock skew allowed on exp, nbf and iat"`
	MaxTokenBytes          int           `yaml:"max_token_bytes" default:"4096" valid:"256..16384" help:"longer tokens are refused unparsed"`
	// CacheEntries tokens verified within the last CacheTTL are accepted
	// again without verifying them, as long as their exp, nbf and iat
	// (with the leeway) still hold and, with a JWKS, the set still holds
	// their key; refusals are never cached. An entry is ~250-320 bytes
	// whatever the token's length (keyed by its SHA-256; the subject is at
	// most 64 bytes), ~3 MB at the default.
	CacheEntries int           `yaml:"cache_entries" default:"10000" valid:"0..1000000" help:"verified tokens answered again without verifying them, ~250 bytes plus the token each; 0 off"`
	CacheTTL     time.Duration `yaml:"cache_ttl" default:"1m" valid:"0s..10m" help:"how long a verified token is answered from the cache at most; 0 off"`
}

// DefaultTokenCacheTTL is the default of auth.jwt.cache_ttl.
var DefaultTokenCacheTTL = Default().Auth.JWT.CacheTTL

// KeySet reports whether a JWT key source is configured.
func (j JWT) KeySet() bool { return j.Secret != "" || j.PublicKeyFile != "" || j.JWKS != "" }

func (a Auth) validate() error {
	if a.OrderIDKey != "" {
		if _, err := orderid.ParseKey(a.OrderIDKey); err != nil {
			return fmt.Errorf("config: auth.order_id_key: %v", err)
		}
	}
	j := a.JWT
	sources := 0
	for _, set := range []bool{j.Secret != "", j.PublicKeyFile != "", j.JWKS != ""} {
		if set {
			sources++
		}
	}
	if sources > 1 {
		return errors.New("config: set only one of auth.jwt.secret, auth.jwt.public_key_file and auth.jwt.jwks")
	}
	if j.Secret != "" && len(j.Secret) < 32 {
		return errors.New("config: auth.jwt.secret must be at least 32 bytes")
	}
	for _, alg := range j.Algorithms {
		if !slices.Contains(auth.Algorithms, alg) {
			return fmt.Errorf("config: auth.jwt.algorithms %q: want one of %s", alg, strings.Join(auth.Algorithms, ", "))
		}
		if sources == 1 && auth.Symmetric(alg) != (j.Secret != "") {
			return fmt.Errorf("config: auth.jwt.algorithms %q does not go with the configured key (HS* need auth.jwt.secret, the others a public key or JWKS)", alg)
		}
	}
	return nil
}

// validateServe is what a server with a real database needs: a key to
// verify shoppers with (unless none was chosen) and the order id key.
func (a Auth) validateServe() error {
	if a.Shopper == ShopperJWT && !a.JWT.KeySet() {
		return errors.New("config: auth.shopper jwt needs auth.jwt.secret (SECKILL_AUTH_JWT_SECRET), auth.jwt.public_key_file (SECKILL_AUTH_JWT_PUBLIC_KEY_FILE) or auth.jwt.jwks (SECKILL_AUTH_JWT_JWKS) with mysql.dsn; or choose auth.shopper none (SECKILL_AUTH_SHOPPER=none) explicitly")
	}
	if a.OrderIDKey == "" {
		return errors.New("config: auth.order_id_key (SECKILL_AUTH_ORDER_ID_KEY, 32 hex digits) is required with mysql.dsn: every instance must encrypt order ids alike")
	}
	return nil
}

// validate checks the admin token list: comma-separated, each at least
// 16 characters.
func (a Admin) validate() error {
	if a.Token == "" {
		return nil
	}
	for _, t := range strings.Split(a.Token, ",") {
		if len(strings.TrimSpace(t)) < 16 {
			return errors.New("config: admin.token must be at least 16 characters (each, in a comma-separated list)")
		}
	}
	return nil
}

// Tokens returns the admin tokens of a comma-separated list.
func (a Admin) Tokens() []string {
	var out []string
	for _, t := range strings.Split(a.Token, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
