package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var hsSecret = []byte("hs256-fast-path-test-secret-0123456789")

// hsVerifier returns a verifier with an issuer and an audience required,
// as production configures them, and the fast path on.
func hsVerifier(t testing.TB) *Verifier {
	t.Helper()
	v, err := New(context.Background(), Config{Secret: hsSecret, Issuer: "idp", Audience: "seckill", Leeway: 5 * time.Second, CacheEntries: 100, CacheTTL: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.hs == nil {
		t.Fatal("an HS256 secret has no fast path")
	}
	return v
}

// signRaw signs header and payload (raw JSON) with secret.
func signRaw(secret []byte, header, payload string) string {
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}

// both verifies tok on the fast path and with golang-jwt alone.
func both(v *Verifier, tok string) (handled bool, fast, slow jwt.RegisteredClaims, fastErr, slowErr error) {
	var fc, sc claims
	handled, fastErr = v.hs.verify(tok, &fc)
	_, slowErr = v.parser.ParseWithClaims(tok, &sc, v.keyfunc(context.Background()))
	return handled, fc.RegisteredClaims, sc.RegisteredClaims, fastErr, slowErr
}

// agree fails t when the fast path took tok and decided otherwise than
// golang-jwt: accepting what it refuses, refusing what it accepts, or
// reading other claims.
func agree(t *testing.T, v *Verifier, tok string) (handled bool, err error) {
	t.Helper()
	handled, fast, slow, fastErr, slowErr := both(v, tok)
	if !handled {
		return false, slowErr
	}
	if (fastErr == nil) != (slowErr == nil) {
		t.Fatalf("token %q: fast path says %v, golang-jwt %v", tok, fastErr, slowErr)
	}
	if fastErr == nil && !sameClaims(fast, slow) {
		t.Fatalf("token %q: fast path read %+v, golang-jwt %+v", tok, fast, slow)
	}
	return true, fastErr
}

func TestHS256FastPathDecidesLikeGolangJWT(t *testing.T) {
	t.Parallel()
	v := hsVerifier(t)
	now := time.Now().Unix()
	payload := func(extra string) string {
		return `{"sub":"alice","iss":"idp","aud":"seckill","iat":` + itoa(now) + `,"exp":` + itoa(now+60) + extra + `}`
	}
	const header = `{"alg":"HS256","typ":"JWT"}`
	for _, tc := range []struct {
		name     string
		tok      string
		handled  bool
		accepted bool
	}{
		{"valid", signRaw(hsSecret, header, payload("")), true, true},
		{"members swapped", signRaw(hsSecret, `{"typ":"JWT","alg":"HS256"}`, payload("")), true, true},
		{"alg alone", signRaw(hsSecret, `{"alg":"HS256"}`, payload("")), true, true},
		{"other claims", signRaw(hsSecret, header, payload(`,"jti":"x","roles":["a",{"b":null}],"n":1.5e3`)), true, true},
		{"another key", signRaw([]byte("another-secret-of-32-bytes-or-more!!"), header, payload("")), true, false},
		{"another payload's signature", swapSignature(signRaw(hsSecret, header, payload("")), signRaw(hsSecret, header, payload(`,"jti":"y"`))), true, false},
		{"expired", signRaw(hsSecret, header, `{"sub":"alice","iss":"idp","aud":"seckill","exp":`+itoa(now-60)+`}`), true, false},
		{"no exp", signRaw(hsSecret, header, `{"sub":"alice","iss":"idp","aud":"seckill"}`), true, false},
		{"not yet valid", signRaw(hsSecret, header, payload(`,"nbf":`+itoa(now+60))), true, false},
		{"issued in the future", signRaw(hsSecret, header, `{"sub":"alice","iss":"idp","aud":"seckill","iat":`+itoa(now+60)+`,"exp":`+itoa(now+120)+`}`), true, false},
		{"wrong issuer", signRaw(hsSecret, header, `{"sub":"alice","iss":"evil","aud":"seckill","exp":`+itoa(now+60)+`}`), true, false},
		{"wrong audience", signRaw(hsSecret, header, `{"sub":"alice","iss":"idp","aud":["x","y"],"exp":`+itoa(now+60)+`}`), true, false},
		{"exp a string", signRaw(hsSecret, header, `{"sub":"alice","iss":"idp","aud":"seckill","exp":"soon"}`), true, false},
		{"payload not JSON", signRaw(hsSecret, header, `{"sub":"alice",`), false, false},
		{"trailing data after the claims", signRaw(hsSecret, header, payload("")+` {}`), false, false},
		{"alg none", signRaw(hsSecret, `{"alg":"none","typ":"JWT"}`, payload("")), false, false},
		{"HS512", signRaw(hsSecret, `{"alg":"HS512","typ":"JWT"}`, payload("")), false, false},
		{"header with kid", signRaw(hsSecret, `{"alg":"HS256","typ":"JWT","kid":"k1"}`, payload("")), false, true},
		{"header with spaces", signRaw(hsSecret, `{"alg": "HS256"}`, payload("")), false, true},
		{"two segments", strings.Join(strings.Split(signRaw(hsSecret, header, payload("")), ".")[:2], "."), false, false},
		{"four segments", signRaw(hsSecret, header, payload("")) + ".x", false, false},
		{"signature padded", signRaw(hsSecret, header, payload("")) + "=", false, false},
		{"signature short", signRaw(hsSecret, header, payload(""))[:len(signRaw(hsSecret, header, payload("")))-1], false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handled, err := agree(t, v, tc.tok)
			if handled != tc.handled {
				t.Errorf("handled by the fast path = %v; want %v", handled, tc.handled)
			}
			if (err == nil) != tc.accepted {
				t.Errorf("accepted = %v (%v); want %v", err == nil, err, tc.accepted)
			}
			sub, err := v.Verify(t.Context(), tc.tok)
			if (err == nil) != tc.accepted || (err == nil && sub != "alice") {
				t.Errorf("Verify = %q, %v; want accepted %v", sub, err, tc.accepted)
			}
			if err != nil && !errors.Is(err, ErrInvalidToken) {
				t.Errorf("Verify's error %v does not wrap ErrInvalidToken", err)
			}
			// A token accepted is cached (the fast path's at its second
			// verification: tokenCache.again), and answered again from the
			// cache alike; one refused never is.
			cached := func() bool {
				_, ok := v.cache.entries[maphash.String(v.cache.seed, tc.tok)]
				return ok
			}
			if got := cached(); got != (err == nil && !handled) {
				t.Errorf("cached = %v after Verify = %v (fast path: %v); want %v", got, err, handled, err == nil && !handled)
			}
			for i := range 2 {
				if again, err2 := v.Verify(t.Context(), tc.tok); again != sub || (err2 == nil) != (err == nil) {
					t.Errorf("Verify again #%d = %q, %v; want %q, %v", i+1, again, err2, sub, err)
				}
				if got := cached(); got != (err == nil) {
					t.Errorf("cached = %v after Verify again #%d = %v; want cached exactly when accepted", got, i+1, err)
				}
			}
		})
	}
}

// FuzzHS256FastPath signs arbitrary headers and claims with the secret:
// whatever the fast path takes, it must decide as golang-jwt does.
func FuzzHS256FastPath(f *testing.F) {
	now := time.Now().Unix()
	for _, p := range []string{
		`{"sub":"alice","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `}`,
		`{"sub":"alice","iss":"idp","aud":["seckill"],"exp":` + itoa(now+60) + `,"nbf":` + itoa(now) + `,"iat":` + itoa(now) + `}`,
		`{"sub":"a\u006c","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `}`,
		`{"sub":"alice","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `.5}`,
		`{"sub":"alice","iss":"idp","aud":"seckill","exp":null}`,
		`{"SUB":"alice","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `}`,
		`{"sub":"alice","sub":"bob","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `}`,
		// Registered claims alone, decoded without json.Valid: not JSON.
		`{"sub":"alice","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `,}`,
		`{"sub":"alice","iss":"idp","aud":"seckill","exp":` + itoa(now+60),
		`{"sub":"alice" "iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `}`,
		`{"sub":"alice","iss":"idp","aud":["seckill",],"exp":` + itoa(now+60) + `}`,
		`{"sub":"alice","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `}x`,
		// Another member's value, skipped unread: json.Valid must decide.
		`{"sub":"alice","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `,"scope":tru}`,
		`{"sub":"alice","iss":"idp","aud":"seckill","exp":` + itoa(now+60) + `,"roles":[1,}`,
	} {
		f.Add(`{"alg":"HS256","typ":"JWT"}`, p, byte(0))
	}
	for _, p := range claimsCases {
		f.Add(`{"alg":"HS256"}`, p, byte(3))
	}
	f.Fuzz(func(t *testing.T, header, payload string, tamperAt byte) {
		v := fuzzV()
		tok := signRaw(hsSecret, header, payload)
		agree(t, v, tok)
		agree(t, v, tamper(tok, int(tamperAt)))
	})
}

var fuzzV = sync.OnceValue(func() *Verifier {
	v, err := New(context.Background(), Config{Secret: hsSecret, Issuer: "idp", Audience: "seckill", Leeway: 5 * time.Second, CacheEntries: 100, CacheTTL: time.Minute}, nil)
	if err != nil {
		panic(err)
	}
	return v
})

// swapSignature returns tok with the signature of other.
func swapSignature(tok, other string) string {
	return tok[:strings.LastIndexByte(tok, '.')] + other[strings.LastIndexByte(other, '.'):]
}

// tamper changes the i-th byte from the end of tok's payload segment (0:
// unchanged), keeping it base64url.
func tamper(tok string, i int) string {
	if i == 0 {
		return tok
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || len(parts[1]) == 0 {
		return tok
	}
	b := []byte(parts[1])
	j := len(b) - 1 - i%len(b)
	if b[j] == 'A' {
		b[j] = 'B'
	} else {
		b[j] = 'A'
	}
	parts[1] = string(b)
	return strings.Join(parts, ".")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
