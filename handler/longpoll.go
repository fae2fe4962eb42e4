package handler

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

// Watcher holds a read of an order until it changes: *service.Watch.
type Watcher interface {
	// Await returns the order once it differs from o (changed), or o
	// when wait ran out or the instance drains; service.ErrTooManyPolls
	// past the instance's bound.
	Await(ctx context.Context, o service.Order, wait time.Duration) (now service.Order, changed bool, err error)
	// Enabled reports whether a wait may be applied at all.
	Enabled() bool
}

// answerRead answers a read of o with its ETag: 304 Not Modified when
// If-None-Match names it, after holding the read until o changes or
// Prefer's wait runs out (RFC 7240; then Preference-Applied says the
// wait), else 200 with the order.
func (h *orders) answerRead(c *gin.Context, o service.Order) {
	tag := etag(o)
	inm := c.Request.Header.Values("If-None-Match")
	if !noneMatch(inm, tag) {
		writeTagged(c, http.StatusOK, h, o)
		return
	}
	wait, ok := preferredWait(c.Request.Header.Values("Prefer"))
	if !ok || wait == 0 || h.watch == nil || !h.watch.Enabled() || isStar(inm) {
		notModified(c, tag)
		return
	}
	extendDeadlines(c, wait)
	now, changed, err := h.watch.Await(c.Request.Context(), o, wait)
	if err != nil {
		fail(c, h.log, err)
		return
	}
	c.Writer.Header()["Preference-Applied"] = []string{"wait=" + strconv.Itoa(int(wait/time.Second))}
	if changed {
		writeTagged(c, http.StatusOK, h, now)
		return
	}
	notModified(c, tag)
}

// etag is o's strong validator: its Revision, quoted.
func etag(o service.Order) string { return `"` + o.Revision() + `"` }

func writeTagged(c *gin.Context, status int, h *orders, o service.Order) {
	c.Writer.Header()["Etag"] = []string{etag(o)}
	writeOrder(c, status, h.ids, o)
}

// notModified answers 304 with the ETag and no body (RFC 9110 15.4.5).
func notModified(c *gin.Context, tag string) {
	c.Writer.Header()["Etag"] = []string{tag}
	c.Status(http.StatusNotModified)
	c.Writer.WriteHeaderNow()
}

// noneMatch reports whether If-None-Match's values name tag, or "*",
// compared weakly as RFC 9110 13.1.2 says for GET.
func noneMatch(values []string, tag string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == tag {
				return true
			}
		}
	}
	return false
}

// isStar reports an If-None-Match of "*": any state matches, so nothing
// can change into one that does not; it is answered at once.
func isStar(values []string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(t) == "*" {
				return true
			}
		}
	}
	return false
}

// preferredWait returns the first wait preference of Prefer's values
// (RFC 7240: a preference given twice counts once, the first), clamped
// to service.MaxPollWait. A malformed wait (not a non-negative integer
// of seconds) is ignored, as a preference the server cannot honour is
// (ok false).
func preferredWait(values []string) (wait time.Duration, ok bool) {
	for _, v := range values {
		for pref := range strings.SplitSeq(v, ",") {
			name, val, _ := strings.Cut(pref, "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			val, _, _ = strings.Cut(val, ";") // parameters of the preference
			val = strings.Trim(strings.TrimSpace(val), `"`)
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return 0, false
			}
			if err != nil || n > uint64(service.MaxPollWait/time.Second) {
				return service.MaxPollWait, true
			}
			return time.Duration(n) * time.Second, true
		}
	}
	return 0, false
}

// extendDeadlines moves the connection's read and write deadlines past a
// poll of wait, so that neither http.read_timeout (whose expiry would
// cancel the request) nor http.write_timeout cuts it; the answer has
// pollWriteSlack after the wait. A writer that cannot (a test's
// recorder) keeps the server's deadlines.
func extendDeadlines(c *gin.Context, wait time.Duration) {
	rc := http.NewResponseController(c.Writer)
	until := time.Now().Add(wait + pollWriteSlack)
	_ = rc.SetReadDeadline(until)  // http.ErrNotSupported: the server's deadline stays
	_ = rc.SetWriteDeadline(until) // the same
}

// pollWriteSlack is the time left to write a long-poll's answer after
// its wait: the re-read of the order and the write.
const pollWriteSlack = 10 * time.Second
