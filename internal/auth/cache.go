package auth

import (
	"context"
	"crypto"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/keyfunc/v3"
)

// tokenCache remembers recently verified tokens, since a signature check
// dominates an order request (a public key's, or HS256's HMAC: 22,000
// instructions, a quarter of a sold-out refusal); refusals are never
// kept. An entry is found by the token's maphash (a random seed per
// process, far cheaper than hashing it with SHA-256, which costs as much
// as the HMAC) and answers only for the very token it keeps, compared
// byte for byte, only while its exp, nbf and iat still hold, within ttl,
// and while a JWK Set keeps its key. When full, an
// arbitrary entry makes room: a flood of good tokens costs only
// verifications.
//
// An HS256 token, whose fast path verifies it for about what entering it
// costs (docs/performance.md), is entered only when it is verified a
// second time (again): a sale's stream of new buyers, each token seen
// once, then costs no entries, no evictions and no kept tokens for the
// collector to mark, while a shopper's retries are answered from the
// cache from the third on.
type tokenCache struct {
	mu      sync.Mutex
	seed    maphash.Seed
	entries map[uint64]verified
	max     int
	ttl     time.Duration
	leeway  time.Duration
	jwks    keyfunc.Keyfunc // nil with a secret or a PEM key, which never change
	// seen holds the hashes of tokens verified once, each at the slot
	// its hash picks (a later one takes the slot): seenSlots(max) of
	// them, no pointer.
	seen []atomic.Uint64
}

// seenSlots is the size of the table of first sightings for a cache of
// max entries: the power of two at or above max, from 1,024 to 2²⁰ (8
// MiB). At the defaults (10,000 entries) it is 16,384 slots, 128 KiB,
// small enough to stay in a core's cache (at four times that, its look-up
// was a quarter of a microsecond a new token): after 1,000 new tokens a
// token seen before them is still remembered with a chance of 94%, after
// 12,000 (a second of a busy sale on this box) 48%; one forgotten is
// entered at its next verification.
func seenSlots(max int) int {
	n := 1024
	for n < max && n < 1<<20 {
		n <<= 1
	}
	return n
}

// verified is what an entry keeps of a token that passed.
type verified struct {
	token string // the token itself: two tokens may share a hash
	sub   string
	until time.Time // verified + ttl
	// expires: now must be before it (exp + leeway); from: now must not be
	// before it (the later of nbf and iat, - leeway), zero without either.
	expires, from time.Time
	// The JWK Set's key that verified the token, by kid, alg and use.
	kid, alg, use string
	key           crypto.PublicKey
}

func newTokenCache(max int, ttl, leeway time.Duration, jwks keyfunc.Keyfunc) *tokenCache {
	if max <= 0 || ttl <= 0 {
		return nil
	}
	return &tokenCache{seed: maphash.MakeSeed(), entries: make(map[uint64]verified), max: max, ttl: ttl, leeway: leeway, jwks: jwks,
		seen: make([]atomic.Uint64, seenSlots(max))}
}

// again reports whether the token of key was verified before, as far as the table
// of first sightings remembers, and remembers it. A false yes (another
// token of the same 64-bit hash) only enters a token early: the entry
// still answers only for itself.
func (c *tokenCache) again(key uint64) bool {
	h := key | 1 // never 0, an empty slot
	s := &c.seen[h&uint64(len(c.seen)-1)]
	if s.Load() == h {
		return true
	}
	s.Store(h)
	return false
}

// key is token's hash, by which get, again and put find it: hashed once
// per verification.
func (c *tokenCache) key(token string) uint64 { return maphash.String(c.seed, token) }

// get returns the subject of a token verified earlier that would pass
// verification now; key is c.key(token).
func (c *tokenCache) get(ctx context.Context, key uint64, token string, now time.Time) (string, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	ok = ok && sameToken(e.token, token)
	if ok && !e.usable(now) {
		delete(c.entries, key)
		ok = false
	}
	c.mu.Unlock()
	if !ok || (c.jwks != nil && !c.sameKey(ctx, e)) {
		return "", false
	}
	return e.sub, true
}

// sameToken compares a and b in time that depends on their length only.
func sameToken(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var diff byte
	for i := 0; i < len(a); i++ {
		diff |= a[i] ^ b[i]
	}
	return diff == 0
}

func (e verified) usable(now time.Time) bool {
	return now.Before(e.until) && now.Before(e.expires) && !now.Before(e.from)
}

// sameKey reports whether the JWK Set still holds the key that verified
// the entry's token under its kid, with the same alg and use.
func (c *tokenCache) sameKey(ctx context.Context, e verified) bool {
	jwk, err := c.jwks.Storage().KeyRead(ctx, e.kid)
	if err != nil {
		return false
	}
	m := jwk.Marshal()
	return m.ALG.String() == e.alg && string(m.USE) == e.use && equalKey(publicKey(jwk.Key()), e.key)
}

// keyOf completes e with the alg and use of the set's key under e.kid;
// false when the token named no kid or that key did not verify it (a
// refresh in between).
func (c *tokenCache) keyOf(ctx context.Context, e *verified) bool {
	if e.kid == "" {
		return false
	}
	jwk, err := c.jwks.Storage().KeyRead(ctx, e.kid)
	if err != nil || !equalKey(publicKey(jwk.Key()), e.key) {
		return false
	}
	m := jwk.Marshal()
	e.alg, e.use = m.ALG.String(), string(m.USE)
	return true
}

// put keeps a token that passed, verified at now with claims c; key is
// c.key(token).
func (c *tokenCache) put(key uint64, token string, cl *claims, now time.Time, e verified) {
	if cl.ExpiresAt == nil { // exp is required: never cache what the rules did not bound
		return
	}
	e.token, e.sub = token, cl.Subject
	e.until = now.Add(c.ttl)
	e.expires = cl.ExpiresAt.Add(c.leeway)
	if cl.NotBefore != nil {
		e.from = cl.NotBefore.Add(-c.leeway)
	}
	if cl.IssuedAt != nil && cl.IssuedAt.Add(-c.leeway).After(e.from) {
		e.from = cl.IssuedAt.Add(-c.leeway)
	}
	if !e.usable(now) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		for k := range c.entries { // map order: an arbitrary entry
			delete(c.entries, k)
			break
		}
	}
	c.entries[key] = e
}

// len returns the number of entries (tests).
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

type publicKeyer interface{ Public() crypto.PublicKey }

// publicKey is what keyfunc verifies with: the public half of a private key.
func publicKey(k any) any {
	if pk, ok := k.(publicKeyer); ok {
		return pk.Public()
	}
	return k
}

func equalKey(a, b any) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && b != nil && eq.Equal(b)
}
