package auth

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkHS256 is checking a new HS256 token, as every order of the
// benchmarks carries one (so the verified-token cache never answers): the
// fast path (hs256 and claims' plain decoder) beside golang-jwt with the
// plain decoder, and golang-jwt alone (its claims read by encoding/json).
func BenchmarkHS256(b *testing.B) {
	v := hsVerifier(b)
	now := time.Now()
	tok, err := Mint(hsSecret, Claims{Subject: "bench-123456", Issuer: "idp", Audience: "seckill", TTL: time.Hour}, now)
	if err != nil {
		b.Fatal(err)
	}
	kf := v.keyfunc(context.Background())
	b.Run("fast path", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c claims
			if handled, err := v.hs.verify(tok, &c); !handled || err != nil {
				b.Fatal(handled, err)
			}
		}
	})
	b.Run("golang-jwt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c claims
			if _, err := v.parser.ParseWithClaims(tok, &c, kf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("golang-jwt alone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c jwt.RegisteredClaims
			if _, err := v.parser.ParseWithClaims(tok, &c, kf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
