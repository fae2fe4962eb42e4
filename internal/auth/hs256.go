package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"strings"
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// hs256 verifies the usual HS256 token without golang-jwt's general
// parser: a header byte for byte one of a few known encodings and a
// 32-byte signature, so no header map or keyed HMAC is built per token
// (docs/performance.md#hand-written-paths).
//
// It decides only as golang-jwt would: the same HMAC, claims type and
// Validator. Any other token goes to golang-jwt.
type hs256 struct {
	headers   [len(hs256Headers)]string // the known headers, base64url
	validator *jwt.Validator
	scratch   sync.Pool // *hsScratch
}

// hs256Headers are the headers taken without parsing: golang-jwt's own
// (auth.Mint's and the load tests'), its members swapped, and alg alone.
var hs256Headers = [...]string{
	`{"alg":"HS256","typ":"JWT"}`,
	`{"typ":"JWT","alg":"HS256"}`,
	`{"alg":"HS256"}`,
}

// hsScratch is one verification's buffers and a keyed HMAC, reused:
// Reset restores the keyed state without hashing the key again.
type hsScratch struct {
	mac     hash.Hash
	in      []byte // the token, copied: the views below are into it
	payload []byte
	sig     [sha256.Size]byte
	sum     [sha256.Size]byte
}

// newHS256 returns the fast path for secret, checking claims with opts
// (the parser's).
func newHS256(secret []byte, opts []jwt.ParserOption) *hs256 {
	h := &hs256{validator: jwt.NewValidator(opts...)}
	for i, raw := range hs256Headers {
		h.headers[i] = base64.RawURLEncoding.EncodeToString([]byte(raw))
	}
	h.scratch.New = func() any { return &hsScratch{mac: hmac.New(sha256.New, secret)} }
	return h
}

// keepScratch bounds the buffers a pooled scratch keeps.
const keepScratch = 8 << 10

// sigLen is the base64url length of an HS256 signature.
var sigLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// verify decodes and checks token into c. handled is false when token is
// not of the shape it takes: then c is untouched and golang-jwt decides.
func (h *hs256) verify(token string, c *claims) (handled bool, err error) {
	header, rest, _ := strings.Cut(token, ".")
	if !h.known(header) {
		return false, nil
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || len(sig) != sigLen {
		return false, nil
	}
	s := h.scratch.Get().(*hsScratch)
	defer h.scratch.Put(s)
	if cap(s.in) > keepScratch { // a rare long token does not stay pooled
		s.in, s.payload = nil, nil
	}
	s.in = append(s.in[:0], token...)
	signed := s.in[:len(header)+1+len(payload)]
	if n, err := base64.RawURLEncoding.Decode(s.sig[:], s.in[len(signed)+1:]); err != nil || n != sha256.Size {
		return false, nil
	}
	s.payload = s.payload[:0]
	s.payload, err = base64.RawURLEncoding.AppendDecode(s.payload, s.in[len(header)+1:len(signed)])
	if err != nil {
		return false, nil
	}
	// The usual payload, registered claims alone, is decoded and known
	// valid JSON in one pass; any other is checked whole first.
	decoded, only := c.decodeKnown(s.payload)
	if !(decoded && only) && !json.Valid(s.payload) {
		*c = claims{}
		return false, nil
	}
	s.mac.Reset()
	s.mac.Write(signed)
	if !hmac.Equal(s.mac.Sum(s.sum[:0]), s.sig[:]) {
		return true, fmt.Errorf("%w: %w: %w", ErrInvalidToken, jwt.ErrTokenSignatureInvalid, jwt.ErrSignatureInvalid)
	}
	if !decoded {
		if err := c.UnmarshalJSON(s.payload); err != nil {
			return true, fmt.Errorf("%w: %w: %w", ErrInvalidToken, jwt.ErrTokenMalformed, err)
		}
	}
	if err := h.validator.Validate(c); err != nil {
		return true, fmt.Errorf("%w: %w: %w", ErrInvalidToken, jwt.ErrTokenInvalidClaims, err)
	}
	return true, nil
}

func (h *hs256) known(header string) bool {
	for _, k := range h.headers {
		if header == k {
			return true
		}
	}
	return false
}
