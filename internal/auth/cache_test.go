package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
)

const cacheSecret = "cache-test-secret-0123456789abcdef"

// hsVerifier is an HS384 Verifier with the production defaults of
// auth.jwt (the cache on), changed by opt.
func hsVerifier(t *testing.T, opt func(*auth.Config)) *auth.Verifier {
	t.Helper()
	cfg := defaults()
	cfg.Issuer = ""
	cfg.Secret = []byte(cacheSecret)
	cfg.Algorithms = []string{"HS384"}
	if opt != nil {
		opt(&cfg)
	}
	v, err := auth.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if auth.CacheLen(v) < 0 {
		t.Fatal("the verified-token cache is off with the production defaults")
	}
	return v
}

// mint signs sub's HS384 token, issued (and valid from) at iat, expiring
// ttl later.
func mint(t *testing.T, sub string, iat time.Time, ttl time.Duration) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS384, jwt.RegisteredClaims{
		Subject: sub, Audience: jwt.ClaimStrings{"seckill"},
		IssuedAt: jwt.NewNumericDate(iat), NotBefore: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(iat.Add(ttl)),
	}).SignedString([]byte(cacheSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func prime(t *testing.T, v *auth.Verifier, tok, sub string, at time.Time) {
	t.Helper()
	if err := auth.PrimeCache(v, tok, sub, at); err != nil {
		t.Fatalf("prime(%s at %v): %v", sub, at, err)
	}
}

// TestTokenCacheAnswersOnlyWhatWouldPassNow: a cached token is accepted
// again only while verifying it would pass now: past its exp (with the
// leeway), before its nbf or iat, or past the cache's ttl, it is verified
// again, and refused if it fails.
func TestTokenCacheAnswersOnlyWhatWouldPassNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	leeway := config.Default().Auth.JWT.Leeway

	t.Run("a good token, again", func(t *testing.T) {
		v := hsVerifier(t, nil)
		tok := mint(t, "alice", now, time.Hour)
		for i := range 2 {
			if sub, err := v.Verify(ctx, tok); err != nil || sub != "alice" {
				t.Fatalf("Verify #%d = %q, %v; want alice", i+1, sub, err)
			}
		}
		if n := auth.CacheLen(v); n != 1 {
			t.Errorf("%d cached tokens; want 1", n)
		}
	})
	t.Run("answered from the cache within its ttl", func(t *testing.T) {
		// The control of the cases below: a primed entry is what answers.
		v := hsVerifier(t, nil)
		tok := mint(t, "alice", now, time.Hour)
		prime(t, v, tok, "primed", now)
		if sub, err := v.Verify(ctx, tok); err != nil || sub != "primed" {
			t.Fatalf("Verify = %q, %v; want the cached subject", sub, err)
		}
	})
	t.Run("past the ttl: verified again", func(t *testing.T) {
		v := hsVerifier(t, nil)
		tok := mint(t, "alice", now.Add(-time.Hour), 2*time.Hour)
		prime(t, v, tok, "primed", now.Add(-config.DefaultTokenCacheTTL-time.Second))
		if sub, err := v.Verify(ctx, tok); err != nil || sub != "alice" {
			t.Fatalf("Verify = %q, %v; want alice, verified again", sub, err)
		}
	})
	t.Run("past exp within the ttl: refused", func(t *testing.T) {
		v := hsVerifier(t, nil)
		// exp is leeway+1s ago; cached 10s before that, while it was good.
		iat := now.Add(-leeway - time.Minute)
		tok := mint(t, "alice", iat, time.Minute-time.Second)
		prime(t, v, tok, "alice", now.Add(-leeway-11*time.Second))
		if sub, err := v.Verify(ctx, tok); !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("Verify(an expired token in the cache) = %q, %v; want ErrInvalidToken", sub, err)
		}
		if n := auth.CacheLen(v); n != 0 {
			t.Errorf("%d cached tokens after refusing; want 0", n)
		}
	})
	t.Run("before nbf and iat: refused", func(t *testing.T) {
		v := hsVerifier(t, nil)
		iat := now.Add(leeway + time.Minute) // nbf = iat
		tok := mint(t, "alice", iat, time.Hour)
		prime(t, v, tok, "alice", iat) // as if the clock had been ahead, then stepped back
		if sub, err := v.Verify(ctx, tok); !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("Verify(a token not valid yet, in the cache) = %q, %v; want ErrInvalidToken", sub, err)
		}
	})
	t.Run("refusals are not cached", func(t *testing.T) {
		v := hsVerifier(t, nil)
		tok := mint(t, "alice", now, time.Hour)
		forged := tok[:len(tok)-2] + "AA"
		for range 2 {
			if _, err := v.Verify(ctx, forged); !errors.Is(err, auth.ErrInvalidToken) {
				t.Fatalf("Verify(forged signature) = %v; want ErrInvalidToken", err)
			}
		}
		if n := auth.CacheLen(v); n != 0 {
			t.Errorf("%d cached tokens after refusals; want 0", n)
		}
	})
	t.Run("off", func(t *testing.T) {
		for _, opt := range []func(*auth.Config){
			func(c *auth.Config) { c.CacheEntries = 0 },
			func(c *auth.Config) { c.CacheTTL = 0 },
		} {
			cfg := auth.Config{Secret: []byte(cacheSecret), CacheEntries: 10, CacheTTL: time.Minute}
			opt(&cfg)
			v, err := auth.New(ctx, cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if auth.CacheLen(v) >= 0 {
				t.Errorf("cache on with entries %d, ttl %v; want off", cfg.CacheEntries, cfg.CacheTTL)
			}
		}
	})
}

// TestTokenCacheIsBounded: any number of good tokens keeps at most
// cache_entries of them.
func TestTokenCacheIsBounded(t *testing.T) {
	t.Parallel()
	const max = 8
	v := hsVerifier(t, func(c *auth.Config) { c.CacheEntries = max })
	now := time.Now()
	for i := range 5 * max {
		sub := "u-" + strconv.Itoa(i)
		if got, err := v.Verify(context.Background(), mint(t, sub, now, time.Hour)); err != nil || got != sub {
			t.Fatalf("Verify(%s) = %q, %v", sub, got, err)
		}
		if n := auth.CacheLen(v); n > max {
			t.Fatalf("%d cached tokens after %d; want at most %d", n, i+1, max)
		}
	}
}

// TestTokenCacheForgetsRemovedKeys: a token cached while its key was in
// the JWK Set is refused once a refresh has removed the key, within the
// cache's ttl, as verifying it again would refuse it.
func TestTokenCacheForgetsRemovedKeys(t *testing.T) {
	t.Parallel()
	k1 := newSigner(t, "k1", jwt.SigningMethodES256)
	k2 := newSigner(t, "k2", jwt.SigningMethodES256)
	p := &idp{}
	p.set(k1)
	v := serveJWKS(t, p, func(*auth.Config) {})
	tok := k1.token(t, "alice")
	mustVerify(t, v, tok, "alice", "a k1 token")
	mustVerify(t, v, tok, "alice", "the same k1 token, cached")
	if n := auth.CacheLen(v); n != 1 {
		t.Fatalf("%d cached tokens; want 1", n)
	}
	p.set(k2) // k1 removed; the first k2 token fetches the set again
	mustVerify(t, v, k2.token(t, "bob"), "bob", "a token of the new key k2")
	mustRefuse(t, v, tok, "the cached token of the removed key k1")
}

// TestTokenCache_HS256IsEnteredOnItsSecondVerification: an HS256 token
// (the fast path) is entered when verified a second time; a stream of
// tokens each sent once enters none.
func TestTokenCache_HS256IsEnteredOnItsSecondVerification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := hsVerifier(t, func(c *auth.Config) { c.Algorithms = []string{"HS256"} })
	now := time.Now()
	mint256 := func(sub string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Subject: sub, Audience: jwt.ClaimStrings{"seckill"},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		}).SignedString([]byte(cacheSecret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for i := range 1000 {
		sub := "once-" + strconv.Itoa(i)
		if got, err := v.Verify(ctx, mint256(sub)); err != nil || got != sub {
			t.Fatalf("Verify(%s) = %q, %v", sub, got, err)
		}
	}
	if n := auth.CacheLen(v); n != 0 {
		t.Fatalf("%d cached tokens after 1,000 tokens sent once each; want 0", n)
	}
	tok := mint256("alice")
	for i, want := range []int{0, 1, 1} {
		if got, err := v.Verify(ctx, tok); err != nil || got != "alice" {
			t.Fatalf("Verify #%d = %q, %v; want alice", i+1, got, err)
		}
		if n := auth.CacheLen(v); n != want {
			t.Fatalf("after verification #%d: %d cached tokens; want %d", i+1, n, want)
		}
	}
}
