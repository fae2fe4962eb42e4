package handler

import (
	"math"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/plainjson"
)

// decodeOrder is decode for the order body, the request of every sale:
// the plain shape clients send ({"sku_id":1,"user_id":"u-1","quantity":1}:
// each known field at most once, by its exact name, integers without a
// fraction or an exponent, a user_id without escapes) is read without
// reflection; anything else goes through decode's encoding/json path,
// which accepts and refuses it with its usual messages. The
// plain shape is a subset of what encoding/json reads to the same values,
// so nothing it refused is accepted.
func decodeOrder(c *gin.Context, max int64, dst *orderRequest) bool {
	body, ok := readBody(c, max)
	if !ok {
		return false
	}
	if parseOrder(body, dst) {
		return true
	}
	*dst = orderRequest{}
	if msg := unmarshal(body, dst); msg != "" {
		abort(c, http.StatusBadRequest, codeInvalid, msg)
		return false
	}
	return true
}

// The fields of orderRequest, by index.
const (
	orderSKU = iota
	orderUser
	orderQuantity
)

// plainOrder holds what an orderRequest parsed by parseOrder points at.
type plainOrder struct {
	sku, quantity int64
	user          string
}

// parseOrder decodes body into dst when it has the plain shape and
// reports whether it did; false leaves dst to be decoded again.
func parseOrder(body []byte, dst *orderRequest) bool {
	var seen [3]bool
	var v *plainOrder // one allocation for the three values
	return plainjson.Object(body, func(key []byte, i int) (int, bool) {
		field := -1
		switch string(key) {
		case "sku_id":
			field = orderSKU
		case "user_id":
			field = orderUser
		case "quantity":
			field = orderQuantity
		}
		if field < 0 || seen[field] {
			return 0, false // unknown, folded ("SKU_ID") or repeated: encoding/json decides
		}
		seen[field] = true
		if v == nil {
			v = new(plainOrder)
		}
		if field == orderUser {
			s, end, ok := plainjson.String(body, i)
			if !ok {
				return 0, false
			}
			v.user = string(s)
			dst.UserID = &v.user
			return end, true
		}
		n, end, ok := plainInt(body, i)
		if !ok {
			return 0, false
		}
		if field == orderSKU {
			v.sku, dst.SKUID = n, &v.sku
		} else {
			v.quantity, dst.Quantity = n, &v.quantity
		}
		return end, true
	})
}

// plainInt reads a JSON integer that fits an int64 at b[i:], without a
// fraction or an exponent, and returns the index after it.
func plainInt(b []byte, i int) (int64, int, bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == start || (j-start > 1 && b[start] == '0') {
		return 0, 0, false // no digit, or a leading zero: not JSON
	}
	if j < len(b) && b[j] != ',' && b[j] != '}' && !plainjson.Space(b[j]) {
		return 0, 0, false // a fraction, an exponent, or not a number
	}
	limit := uint64(math.MaxInt64)
	if start > i {
		limit++ // -9223372036854775808
	}
	var u uint64
	for _, d := range b[start:j] {
		if u > (limit-uint64(d-'0'))/10 {
			return 0, 0, false // beyond int64: encoding/json's type error
		}
		u = u*10 + uint64(d-'0')
	}
	if start > i {
		return int64(-u), j, true
	}
	return int64(u), j, true
}
