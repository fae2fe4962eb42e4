package auth_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/auth"
)

// BenchmarkVerify is what verifying one shopper's token costs per order
// request, by algorithm. The cached rows send the same token again within
// auth.jwt.cache_ttl; the others verify it every time.
func BenchmarkVerify(b *testing.B) {
	for _, cached := range []bool{false, true} {
		name := "uncached"
		if cached {
			name = "cached"
		}
		b.Run(name, func(b *testing.B) { benchmarkVerify(b, cached) })
	}
}

func benchmarkVerify(b *testing.B, cached bool) {
	secret := []byte("bench-shopper-secret-0123456789abcdef")
	for _, method := range []jwt.SigningMethod{jwt.SigningMethodHS256, jwt.SigningMethodES256, jwt.SigningMethodEdDSA, jwt.SigningMethodRS256} {
		b.Run(method.Alg(), func(b *testing.B) {
			cfg := defaults()
			if !cached {
				cfg.CacheEntries = 0
			}
			var tok string
			if method == jwt.SigningMethodHS256 {
				cfg.Secret = secret
				var err error
				if tok, err = auth.Mint(secret, auth.Claims{Subject: "u-1", Issuer: cfg.Issuer, Audience: cfg.Audience, TTL: time.Hour}, time.Now()); err != nil {
					b.Fatal(err)
				}
			} else {
				s := newSigner(b, "bench", method)
				der, err := x509.MarshalPKIXPublicKey(s.key.Public())
				if err != nil {
					b.Fatal(err)
				}
				path := filepath.Join(b.TempDir(), "idp.pem")
				if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
					b.Fatal(err)
				}
				cfg.PublicKeyFile = path
				tok = s.token(b, "u-1")
			}
			v, err := auth.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
