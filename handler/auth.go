package handler

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

// Shoppers verifies shoppers' bearer tokens (auth.shopper jwt). A nil
// Shoppers in Config is auth.shopper none: the body's user_id is trusted.
type Shoppers interface {
	// Verify returns the verified user (the token's sub); any error is
	// answered 401 invalid_token.
	Verify(ctx context.Context, token string) (string, error)
}

// Stable codes of shopper authentication.
const (
	codeInvalidToken = "invalid_token" // a token was sent and refused
	codeUserMismatch = "user_mismatch" // the body's user_id is not the token's sub
	// codeInvalidSubject: a verified token whose sub cannot name a buyer
	// (see service.IDProblem); only its issuer can mend it.
	codeInvalidSubject = "invalid_subject"
)

// shopperAuth identifies shoppers; a nil verifier means none.
type shopperAuth struct {
	verifier Shoppers
	log      *slog.Logger
}

// enabled reports whether shoppers must present a verified token.
func (a shopperAuth) enabled() bool { return a.verifier != nil }

// anonymous reports whether the request carries no credential at all:
// no Authorization header and no token in the query.
func anonymous(c *gin.Context) bool {
	return len(c.Request.Header.Values("Authorization")) == 0 && !tokenInQuery(c)
}

// tokenInQuery reports a token sent in the URL, where proxies and access
// logs keep it: refused even when a header carries one too.
func tokenInQuery(c *gin.Context) bool {
	if c.Request.URL.RawQuery == "" {
		return false
	}
	q := c.Request.URL.Query()
	return q.Has("access_token") || q.Has("token") || q.Has("jwt")
}

// user returns the verified user of the request, answering 401 itself
// when there is none. The token is never logged, only why it was refused.
func (a shopperAuth) user(c *gin.Context) (string, bool) {
	if tokenInQuery(c) {
		unauthorized(c, codeInvalidToken, "send the token in the Authorization header, never in the URL")
		return "", false
	}
	vals := c.Request.Header.Values("Authorization")
	if len(vals) == 0 {
		unauthorized(c, codeUnauthorized, "a bearer token is required: Authorization: Bearer <JWT>")
		return "", false
	}
	scheme, token, found := strings.Cut(vals[0], " ")
	if len(vals) != 1 || !found || !strings.EqualFold(scheme, "Bearer") || token == "" {
		unauthorized(c, codeInvalidToken, "the Authorization header must be one 'Bearer <JWT>'")
		return "", false
	}
	sub, err := a.verifier.Verify(c.Request.Context(), token)
	if err != nil {
		a.log.DebugContext(c.Request.Context(), "shopper token refused", "err", err)
		unauthorized(c, codeInvalidToken, "the bearer token is invalid or expired")
		return "", false
	}
	if p := service.IDProblem(sub); p != "" {
		abort(c, http.StatusBadRequest, codeInvalidSubject, "the bearer token's sub "+p+": it cannot name a shopper")
		return "", false
	}
	return sub, true
}

func unauthorized(c *gin.Context, code, message string) {
	if code == codeInvalidToken {
		c.Header("WWW-Authenticate", `Bearer realm="seckill", error="invalid_token"`)
	} else {
		c.Header("WWW-Authenticate", `Bearer realm="seckill"`)
	}
	abort(c, http.StatusUnauthorized, code, message)
}

// identify returns the verified user before the body is read: "" with
// none, the token's sub with jwt (answering 401 itself when there is none).
func (a shopperAuth) identify(c *gin.Context) (string, bool) {
	if !a.enabled() {
		return "", true
	}
	return a.user(c)
}

// buyer decides who buys: with jwt the verified user (a body user_id, if
// any, must be the same: 403 user_mismatch otherwise); with none the
// body's user_id, which is then required.
func (a shopperAuth) buyer(c *gin.Context, verified string, bodyUser *string) (string, bool) {
	if !a.enabled() {
		if bodyUser == nil {
			abort(c, http.StatusBadRequest, codeInvalid, `field "user_id" is required`)
			return "", false
		}
		// One of only spaces is left to OrderRequest.Validate's own message.
		if p := service.IDProblem(*bodyUser); p != "" && strings.TrimSpace(*bodyUser) != "" {
			abort(c, http.StatusBadRequest, codeInvalid, "user_id "+p)
			return "", false
		}
		return *bodyUser, true
	}
	user := verified
	if bodyUser != nil && *bodyUser != user {
		abort(c, http.StatusForbidden, codeUserMismatch, "user_id must be the bearer token's subject (or omitted)")
		return "", false
	}
	return user, true
}
