package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
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
	Shopper string `yaml:"shopper"` // jwt or none; default jwt
	// OrderIDKey is the AES key (32, 48 or 64 hex digits) that encrypts
	// order ids for clients. Every instance needs the same; changing it
	// makes earlier ids unreadable. Required with mysql.dsn; generated in
	// the quick start.
	OrderIDKey string `yaml:"order_id_key"`
	JWT        JWT    `yaml:"jwt"`
	// PaymentTokens are the bearer tokens of the payment system, which
	// confirms payments on /internal/v1 (comma-separated, each at least
	// 16 characters, never logged); none refuses every confirmation.
	PaymentTokens string `yaml:"payment_tokens"`
}

// JWT configures the verification of shopper tokens: exactly one of
// Secret, PublicKeyFile and JWKS (the quick start generates a secret).
type JWT struct {
	// Algorithms a token may use; default HS256 with a secret, the key's
	// own with a PEM file, RS256, ES256 and EdDSA with a JWKS.
	Algorithms    []string `yaml:"algorithms"`
	Secret        string   `yaml:"secret"`          // HS256 secret, at least 32 bytes
	PublicKeyFile string   `yaml:"public_key_file"` // PEM public key or certificate
	JWKS          string   `yaml:"jwks"`            // JWK Set URL (http, https) or file path
	// JWKSRefresh is how often the JWK Set is fetched again: a key removed
	// there is refused here after at most this long.
	JWKSRefresh time.Duration `yaml:"jwks_refresh"` // default 5m
	// JWKSUnknownKIDInterval: a token naming an unknown kid fetches the
	// set again at most this often (new keys work at once, without a flood).
	JWKSUnknownKIDInterval time.Duration `yaml:"jwks_unknown_kid_interval"` // default 30s
	Issuer                 string        `yaml:"issuer"`                    // required iss when set; default "" (not checked)
	Audience               string        `yaml:"audience"`                  // required aud when set; default "seckill"
	Leeway                 time.Duration `yaml:"leeway"`                    // clock skew on exp/nbf/iat, default 30s
	MaxTokenBytes          int           `yaml:"max_token_bytes"`           // default 4096
	// CacheEntries tokens verified within the last CacheTTL are accepted
	// again without verifying them, as long as their exp, nbf and iat
	// (with the leeway) still hold and, with a JWKS, the set still holds
	// their key; refusals are never cached. An entry is ~250-320 bytes
	// whatever the token's length (keyed by its SHA-256; the subject is at
	// most 64 bytes), ~3 MB at the default; 0 for either turns the cache off.
	CacheEntries int           `yaml:"cache_entries"` // default 10000, at most 1000000
	CacheTTL     time.Duration `yaml:"cache_ttl"`     // default 1m, at most 10m
}

// Defaults of the verified-token cache (auth.jwt.cache_entries, cache_ttl).
const (
	DefaultTokenCacheEntries = 10000
	DefaultTokenCacheTTL     = time.Minute
)

func defaultAuth() Auth {
	return Auth{
		Shopper: ShopperJWT,
		JWT: JWT{
			JWKSRefresh:            5 * time.Minute,
			JWKSUnknownKIDInterval: 30 * time.Second,
			Audience:               "seckill",
			Leeway:                 30 * time.Second,
			MaxTokenBytes:          4096,
			CacheEntries:           DefaultTokenCacheEntries,
			CacheTTL:               DefaultTokenCacheTTL,
		},
	}
}

// KeySet reports whether a JWT key source is configured.
func (j JWT) KeySet() bool { return j.Secret != "" || j.PublicKeyFile != "" || j.JWKS != "" }

func (a *Auth) applyEnv(getenv func(string) string) error {
	for key, dst := range map[string]*string{
		"SECKILL_AUTH_SHOPPER":             &a.Shopper,
		"SECKILL_AUTH_ORDER_ID_KEY":        &a.OrderIDKey,
		"SECKILL_AUTH_JWT_SECRET":          &a.JWT.Secret,
		"SECKILL_AUTH_JWT_PUBLIC_KEY_FILE": &a.JWT.PublicKeyFile,
		"SECKILL_AUTH_JWT_JWKS":            &a.JWT.JWKS,
		"SECKILL_AUTH_JWT_ISSUER":          &a.JWT.Issuer,
		"SECKILL_AUTH_JWT_AUDIENCE":        &a.JWT.Audience,
	} {
		if v := getenv(key); v != "" {
			*dst = v
		}
	}
	if v := getenv("SECKILL_AUTH_JWT_ALGORITHMS"); v != "" {
		a.JWT.Algorithms = nil
		for _, alg := range strings.Split(v, ",") {
			if alg = strings.TrimSpace(alg); alg != "" {
				a.JWT.Algorithms = append(a.JWT.Algorithms, alg)
			}
		}
	}
	for key, dst := range map[string]*time.Duration{
		"SECKILL_AUTH_JWT_LEEWAY":                    &a.JWT.Leeway,
		"SECKILL_AUTH_JWT_JWKS_REFRESH":              &a.JWT.JWKSRefresh,
		"SECKILL_AUTH_JWT_JWKS_UNKNOWN_KID_INTERVAL": &a.JWT.JWKSUnknownKIDInterval,
		"SECKILL_AUTH_JWT_CACHE_TTL":                 &a.JWT.CacheTTL,
	} {
		if v := getenv(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("config: %s=%q: not a duration", key, v)
			}
			*dst = d
		}
	}
	if v := getenv("SECKILL_AUTH_JWT_MAX_TOKEN_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_AUTH_JWT_MAX_TOKEN_BYTES=%q: not an integer", v)
		}
		a.JWT.MaxTokenBytes = n
	}
	if v := getenv("SECKILL_AUTH_JWT_CACHE_ENTRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_AUTH_JWT_CACHE_ENTRIES=%q: not an integer", v)
		}
		a.JWT.CacheEntries = n
	}
	return nil
}

func (a Auth) validate() error {
	if a.Shopper != ShopperJWT && a.Shopper != ShopperNone {
		return fmt.Errorf("config: auth.shopper %q: want jwt or none", a.Shopper)
	}
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
	switch {
	case j.JWKSRefresh <= 0 || j.JWKSUnknownKIDInterval <= 0:
		return errors.New("config: auth.jwt.jwks_refresh and auth.jwt.jwks_unknown_kid_interval must be positive")
	case j.Leeway < 0 || j.Leeway > 5*time.Minute:
		return errors.New("config: auth.jwt.leeway must be between 0 and 5m")
	case j.MaxTokenBytes < 256 || j.MaxTokenBytes > 16384:
		return errors.New("config: auth.jwt.max_token_bytes must be between 256 and 16384")
	case j.CacheEntries < 0 || j.CacheEntries > 1_000_000:
		return errors.New("config: auth.jwt.cache_entries must be between 0 (off) and 1000000")
	case j.CacheTTL < 0 || j.CacheTTL > 10*time.Minute:
		return errors.New("config: auth.jwt.cache_ttl must be between 0 (off) and 10m")
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
