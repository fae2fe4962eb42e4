package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/orderid"
)

// shopperAuth builds the shopper verifier and the order id codec. The
// quick start generates a missing HS256 secret and order id key, gone
// with the process. auth.shopper none warns: anyone can buy as any
// user_id.
func shopperAuth(ctx context.Context, cfg *config.Config, log *slog.Logger) (handler.ShopperAuth, error) {
	a := &cfg.Auth
	if cfg.Embedded() {
		if a.OrderIDKey == "" {
			a.OrderIDKey = orderid.RandomKey()
		}
		if a.Shopper == config.ShopperJWT && !a.JWT.KeySet() {
			var b [32]byte
			_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
			a.JWT.Secret = hex.EncodeToString(b[:])
		}
	}
	if a.OrderIDKey == "" {
		return handler.ShopperAuth{}, errors.New("config: auth.order_id_key (SECKILL_AUTH_ORDER_ID_KEY) is required with mysql.dsn")
	}
	key, err := orderid.ParseKey(a.OrderIDKey)
	if err != nil {
		return handler.ShopperAuth{}, err
	}
	ids, err := orderid.New(key)
	if err != nil {
		return handler.ShopperAuth{}, err
	}
	if a.Shopper == config.ShopperNone {
		log.Warn("auth.shopper is none: the body's user_id is trusted, so any client can buy as any user; for trusted networks and load tests only")
		return handler.ShopperAuth{OrderIDs: ids}, nil
	}
	v, err := auth.New(ctx, VerifierConfig(a.JWT), log)
	if err != nil {
		return handler.ShopperAuth{}, err
	}
	return handler.ShopperAuth{Shoppers: v, OrderIDs: ids}, nil
}

// VerifierConfig is the shopper token verifier's configuration as j sets
// it: what Serve runs, and what tests and benchmarks of production
// behaviour run.
func VerifierConfig(j config.JWT) auth.Config {
	return auth.Config{
		Algorithms:             j.Algorithms,
		Secret:                 []byte(j.Secret),
		PublicKeyFile:          j.PublicKeyFile,
		JWKS:                   j.JWKS,
		JWKSRefresh:            j.JWKSRefresh,
		JWKSUnknownKIDInterval: j.JWKSUnknownKIDInterval,
		Issuer:                 j.Issuer,
		Audience:               j.Audience,
		Leeway:                 j.Leeway,
		MaxTokenBytes:          j.MaxTokenBytes,
		CacheEntries:           j.CacheEntries,
		CacheTTL:               j.CacheTTL,
	}
}

// QuickStartTokenTTL is how long the quick start's printed shopper token lasts.
const QuickStartTokenTTL = 24 * time.Hour

// ShopperToken mints an HS256 token for sub under cfg's secret, issuer and
// audience: the quick start's printed token and `seckill token`.
func ShopperToken(j config.JWT, sub string, ttl time.Duration) (string, error) {
	if j.Secret == "" {
		return "", errors.New("token: auth.jwt.secret (SECKILL_AUTH_JWT_SECRET) is required: only HS256 tokens can be minted here, public-key ones come from the identity provider")
	}
	return auth.Mint([]byte(j.Secret), auth.Claims{Subject: sub, Issuer: j.Issuer, Audience: j.Audience, TTL: ttl}, time.Now())
}
