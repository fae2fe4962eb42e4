package auth

import (
	"context"
	"hash/maphash"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestTokenCacheAnswersOnlyItsToken: the cache finds an entry by a 64-bit
// maphash, which two tokens can share; an entry found under another
// token's hash answers nothing, so a token is only ever answered from
// the cache as itself.
func TestTokenCacheAnswersOnlyItsToken(t *testing.T) {
	t.Parallel()
	c := newTokenCache(10, time.Minute, 0, nil)
	now := time.Now()
	c.put(c.key("token-a"), "token-a", &claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "alice", ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}}, now, verified{})
	c.entries[maphash.String(c.seed, "token-b")] = c.entries[maphash.String(c.seed, "token-a")] // a collision
	if sub, ok := c.get(context.Background(), c.key("token-b"), "token-b", now); ok {
		t.Errorf("get(token-b) = %q from token-a's entry; want a miss", sub)
	}
	if sub, ok := c.get(context.Background(), c.key("token-a"), "token-a", now); !ok || sub != "alice" {
		t.Errorf("get(token-a) = %q, %v; want alice", sub, ok)
	}
	if sameToken("token-a", "token-b") || !sameToken("token-a", "token-a") || sameToken("token-a", "token-aa") {
		t.Error("sameToken does not compare exactly")
	}
}
