package handler

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/orderid"
)

// Every list pages the same way: ?limit= and ?after=, the next_after of
// the previous page. A cursor is an opaque string, the last id of the
// page encoded as order ids are (internal/orderid): it reveals no
// sequence, and a made-up or altered one is a 400, never a page of
// something else.

// pageQuery reads ?limit= (1 to maxLimit, default def) and ?after=,
// writing the 400.
func pageQuery(c *gin.Context, ids *orderid.Codec, def, maxLimit int) (limit int, after int64, ok bool) {
	limit = def
	if v, present := c.GetQuery("limit"); present {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			abort(c, http.StatusBadRequest, codeInvalid, "limit must be an integer from 1 to "+strconv.Itoa(maxLimit))
			return 0, 0, false
		}
		limit = n
	}
	if v, present := c.GetQuery("after"); present {
		id, decoded := ids.Decode(v)
		if !decoded || id < 0 {
			abort(c, http.StatusBadRequest, codeInvalid, "after must be the next_after of a previous page, as it was")
			return 0, 0, false
		}
		after = id
	}
	return limit, after, true
}

// readPage reads with read the page the query asks for (pageQuery: limit,
// by default def, at most maxLimit, and after), answering a failure
// itself; it returns the limit, for nextAfter.
func readPage[T any](c *gin.Context, ids *orderid.Codec, log *slog.Logger, def, maxLimit int,
	read func(ctx context.Context, after int64, limit int) ([]T, error)) (list []T, limit int, ok bool) {
	limit, after, ok := pageQuery(c, ids, def, maxLimit)
	if !ok {
		return nil, 0, false
	}
	list, err := read(c.Request.Context(), after, limit)
	if err != nil {
		fail(c, log, err)
		return nil, 0, false
	}
	return list, limit, true
}

// nextAfter is the cursor of the page after one of n items read with
// limit whose last id is last: nil when the page was not full (the last).
func nextAfter(ids *orderid.Codec, n, limit int, last int64) *string {
	if n < limit {
		return nil
	}
	s := ids.Encode(last)
	return &s
}
