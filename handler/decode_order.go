package handler

import (
	"net/http"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
)

// decodeOrder is decode for an order's body, which takes its usual shape
// on a fast path (fastOrder) and everything else as decode does.
func decodeOrder(c *gin.Context, max int64, dst *orderRequest) bool {
	body, ok := readBody(c, max)
	if !ok || fastOrder(body, dst) {
		return ok
	}
	if msg := unmarshal(body, dst); msg != "" {
		abort(c, http.StatusBadRequest, codeInvalid, msg)
		return false
	}
	return true
}

// orderKey is the index of the member named key among those fastOrder
// takes, as written: sku_id, user_id, quantity, wait; -1 for another.
func orderKey(key []byte) int {
	switch string(key) { // no string is made
	case "sku_id":
		return 0
	case "user_id":
		return 1
	case "quantity":
		return 2
	case "wait":
		return 3
	}
	return -1
}

// orderFields hold what fastOrder read; dst points into them.
type orderFields struct {
	sku, qty int64
	user     string
	wait     bool
}

// fastOrder reads body into dst when it has an order body's usual shape:
// one object of orderKeys, each at most once and as written, integers
// that fit an int64, a string without escapes or control characters in
// valid UTF-8, a bool, JSON's whitespace between them. Anything else
// (null, another or a repeated member, an escape, a wrong type, broken
// JSON, an empty object) reports false with dst untouched, and unmarshal
// answers it as ever. What it takes, encoding/json takes alike
// (FuzzFastOrderDecidesLikeUnmarshal), at a fraction of the cost of its
// reflection, the second Decode for trailing data and the duplicate-key
// walk, on the request most of a sale meets.
func fastOrder(body []byte, dst *orderRequest) bool {
	var f orderFields
	var seen [4]bool
	p := skipSpace(body, 0)
	if p >= len(body) || body[p] != '{' {
		return false
	}
	p = skipSpace(body, p+1)
	for {
		key, q, ok := plainString(body, p)
		if q = skipSpace(body, q); !ok || q >= len(body) || body[q] != ':' {
			return false
		}
		i := orderKey(key)
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
		q = skipSpace(body, q+1)
		switch i {
		case 0:
			f.sku, q, ok = integer(body, q)
		case 1:
			var user []byte
			user, q, ok = plainString(body, q)
			f.user = string(user)
		case 2:
			f.qty, q, ok = integer(body, q)
		case 3:
			f.wait, q, ok = boolean(body, q)
		}
		if p = skipSpace(body, q); !ok || p >= len(body) {
			return false
		}
		if body[p] == '}' {
			break
		}
		if body[p] != ',' {
			return false
		}
		p = skipSpace(body, p+1)
	}
	if skipSpace(body, p+1) != len(body) {
		return false
	}
	if seen[0] {
		dst.SKUID = &f.sku
	}
	if seen[1] {
		dst.UserID = &f.user
	}
	if seen[2] {
		dst.Quantity = &f.qty
	}
	if seen[3] {
		dst.Wait = &f.wait
	}
	return true
}

// skipSpace returns the first index from p that is not JSON whitespace.
func skipSpace(b []byte, p int) int {
	for p < len(b) && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r') {
		p++
	}
	return p
}

// plainString reads the string at p: no escape, no control character,
// valid UTF-8 (which encoding/json would change or refuse).
func plainString(b []byte, p int) ([]byte, int, bool) {
	if p >= len(b) || b[p] != '"' {
		return nil, p, false
	}
	for q := p + 1; q < len(b); q++ {
		switch c := b[q]; {
		case c == '"':
			s := b[p+1 : q]
			return s, q + 1, utf8.Valid(s)
		case c < 0x20 || c == '\\':
			return nil, q, false
		}
	}
	return nil, len(b), false
}

// integer reads the integer at p: an optional minus, then 0 or a digit
// string without a leading zero, that fits an int64; what follows is the
// caller's to check (a fraction or an exponent is not a delimiter).
func integer(b []byte, p int) (int64, int, bool) {
	q := p
	neg := q < len(b) && b[q] == '-'
	if neg {
		q++
	}
	digits := q
	var n uint64
	for ; q < len(b) && b[q] >= '0' && b[q] <= '9'; q++ {
		n = n*10 + uint64(b[q]-'0')
	}
	switch {
	case q == digits || q-digits > 18 || (b[digits] == '0' && q-digits > 1):
		return 0, q, false // none, longer than surely fits (the general path decides), or a leading zero
	case neg:
		return -int64(n), q, true
	}
	return int64(n), q, true
}

// boolean reads true or false at p.
func boolean(b []byte, p int) (bool, int, bool) {
	switch {
	case len(b)-p >= 4 && string(b[p:p+4]) == "true":
		return true, p + 4, true
	case len(b)-p >= 5 && string(b[p:p+5]) == "false":
		return false, p + 5, true
	}
	return false, p, false
}
