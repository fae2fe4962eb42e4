package handler

import (
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/service"
)

// writeOrder answers with o as orderResponse's JSON, byte for byte what
// encoding/json writes (FuzzAppendOrder), without reflection, because it
// is the answer of every sale (docs/performance.md#hand-written-paths).
func writeOrder(c *gin.Context, status int, ids *orderid.Codec, o service.Order) {
	writeOrderAs(c, status, ids.Encode(o.ID), o)
}

// writeOrderAs is writeOrder with the order's opaque id already encoded
// (a 201 also names it in Location).
func writeOrderAs(c *gin.Context, status int, id string, o service.Order) {
	// Every answer that is one order says where it lives: a replayed
	// create (200) as much as the 201, a cancel, a payment, a read.
	c.Writer.Header()["Location"] = []string{orderLocation(id)}
	writeJSON(c, status, appendOrderAs(make([]byte, 0, 192), id, o))
}

// writeWaiting answers 202 with an order created waiting: the order and
// its position, the waiters ahead of it when it joined the line.
func writeWaiting(c *gin.Context, id string, p service.Placed) {
	c.Writer.Header()["Location"] = []string{orderLocation(id)}
	b := appendOrderAs(make([]byte, 0, 224), id, p.Order)
	b = append(b[:len(b)-1], `,"position":`...)
	b = strconv.AppendInt(b, p.Position, 10)
	writeJSON(c, http.StatusAccepted, append(b, '}'))
}

// jsonContentType is the Content-Type of every JSON answer, shared by
// them: net/http only reads a header's values.
var jsonContentType = []string{"application/json; charset=utf-8"}

// writeJSON writes body, a JSON document, with status: what c.Data does,
// without its render value and header slice per answer.
func writeJSON(c *gin.Context, status int, body []byte) {
	c.Writer.Header()["Content-Type"] = jsonContentType
	c.Status(status)
	_, _ = c.Writer.Write(body) // a client gone away is the server's to see
}

func appendOrder(b []byte, ids *orderid.Codec, o service.Order) []byte {
	return appendOrderAs(b, ids.Encode(o.ID), o)
}

func appendOrderAs(b []byte, id string, o service.Order) []byte {
	b = append(b, `{"order_id":"`...)
	b = append(b, id...) // base64url: nothing to escape
	b = append(b, '"')
	b = append(b, `,"sku_id":`...)
	b = strconv.AppendInt(b, o.SKUID, 10)
	b = append(b, `,"user_id":`...)
	b = appendString(b, o.UserID)
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, o.Quantity, 10)
	b = append(b, `,"created_at":"`...)
	b = o.CreatedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","status":`...)
	b = appendString(b, string(o.Status))
	if o.ExpiresAt != nil {
		b = append(b, `,"expires_at":"`...)
		b = o.ExpiresAt.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if o.AllocatedAt != nil {
		b = append(b, `,"allocated_at":"`...)
		b = o.AllocatedAt.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does:
// HTML-safe, with U+2028/U+2029 and invalid UTF-8 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
