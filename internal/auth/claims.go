package auth

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/plainjson"
)

// claims is jwt.RegisteredClaims with its own decoder for the flat shape
// identity providers write (plain strings, integer times, each claim
// once, lower-case): reflection would cost more than the HS256 check.
// Anything else (escapes, nulls, fractions, duplicates, folded names)
// goes to encoding/json, so both accept and refuse the same tokens.
type claims struct {
	jwt.RegisteredClaims
	times [3]jwt.NumericDate // exp, nbf, iat of the plain shape
	aud   [1]string
}

// The registered claims, by index.
const (
	claimIss = iota
	claimSub
	claimAud
	claimExp
	claimNbf
	claimIat
	claimJti
	nClaims
)

var claimNames = [nClaims]string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti"}

// UnmarshalJSON implements json.Unmarshaler.
func (c *claims) UnmarshalJSON(data []byte) error {
	if c.decodePlain(data) {
		return nil
	}
	c.RegisteredClaims = jwt.RegisteredClaims{}
	return json.Unmarshal(data, &c.RegisteredClaims)
}

// decodePlain decodes data if it has the plain shape and reports whether
// it did; false leaves the decoding to encoding/json. It skips the
// values of other members without checking them: data must be valid
// JSON (golang-jwt has checked it, or hs256 has).
func (c *claims) decodePlain(data []byte) bool {
	ok, _ := c.decodeKnown(data)
	return ok
}

// decodeKnown is decodePlain, also reporting whether data held only
// registered claims: then every byte of it was read as JSON's grammar
// asks, so a true ok and a true only mean data is valid JSON.
func (c *claims) decodeKnown(data []byte) (ok, only bool) {
	c.RegisteredClaims = jwt.RegisteredClaims{}
	var seen [nClaims]bool
	only = true
	ok = plainjson.Object(data, func(key []byte, i int) (int, bool) {
		claim := claimIndex(key)
		switch {
		case claim < 0:
			only = false
			return skipValue(data, i)
		case claim >= nClaims, seen[claim]:
			return 0, false // folds to a claim's name, or a duplicate: encoding/json's rules
		}
		seen[claim] = true
		return c.set(claim, data, i)
	})
	return ok, only
}

// claimIndex returns the index of the claim named key, -1 for another
// name, or nClaims for a name encoding/json would match to a claim's
// without being it ("SUB", "ſub").
func claimIndex(key []byte) int {
	for i, name := range claimNames {
		if string(key) == name {
			return i
		}
	}
	for _, name := range claimNames {
		if bytes.EqualFold(key, []byte(name)) {
			return nClaims
		}
	}
	return -1
}

// set decodes the value at data[i:] into claim, returning the index after
// it, or false when the value is not of the plain shape.
func (c *claims) set(claim int, data []byte, i int) (int, bool) {
	switch claim {
	case claimExp, claimNbf, claimIat:
		n, end, ok := plainSeconds(data, i)
		if !ok {
			return 0, false
		}
		t := &c.times[claim-claimExp]
		// What jwt.NumericDate.UnmarshalJSON makes of a whole number.
		t.Time = time.Unix(n, 0).Truncate(jwt.TimePrecision)
		switch claim {
		case claimExp:
			c.ExpiresAt = t
		case claimNbf:
			c.NotBefore = t
		default:
			c.IssuedAt = t
		}
		return end, true
	case claimAud:
		return c.setAudience(data, i)
	}
	s, end, ok := plainjson.String(data, i)
	if !ok {
		return 0, false
	}
	switch claim {
	case claimIss:
		c.Issuer = string(s)
	case claimSub:
		c.Subject = string(s)
	default:
		c.ID = string(s)
	}
	return end, true
}

// setAudience decodes aud: one plain string, or a non-empty array of them.
func (c *claims) setAudience(data []byte, i int) (int, bool) {
	if s, end, ok := plainjson.String(data, i); ok {
		c.aud[0] = string(s)
		c.Audience = c.aud[:]
		return end, true
	}
	if i >= len(data) || data[i] != '[' {
		return 0, false
	}
	i++
	for {
		s, end, ok := plainjson.String(data, plainjson.SkipSpace(data, i))
		if !ok {
			return 0, false // [] too: encoding/json leaves aud nil
		}
		if c.Audience == nil {
			c.aud[0] = string(s)
			c.Audience = c.aud[:]
		} else {
			c.Audience = append(c.Audience[:len(c.Audience):len(c.Audience)], string(s))
		}
		i = plainjson.SkipSpace(data, end)
		if i >= len(data) {
			return 0, false
		}
		switch data[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// plainSeconds reads a non-negative whole number of at most 15 digits
// (exact as a float64, as golang-jwt reads it) at data[i:].
func plainSeconds(data []byte, i int) (int64, int, bool) {
	var n int64
	j := i
	for ; j < len(data) && data[j] >= '0' && data[j] <= '9'; j++ {
		n = n*10 + int64(data[j]-'0')
	}
	digits := j - i
	if digits == 0 || digits > 15 || (digits > 1 && data[i] == '0') {
		return 0, 0, false
	}
	if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
		return 0, 0, false
	}
	return n, j, true
}

// skipValue returns the index after the JSON value at data[i:], which
// golang-jwt has already found valid.
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				end, ok := skipString(data, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default: // a number, true, false or null
		j := i
		for j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ']' && !plainjson.Space(data[j]) {
			j++
		}
		return j, j > i
	}
}

// skipString returns the index after the JSON string at data[i:].
func skipString(data []byte, i int) (int, bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}
