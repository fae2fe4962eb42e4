package handler

import (
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/internal/logging"
)

// accessLog writes one structured line per request once it is answered:
// method, route template ("unmatched" for no route), path, status, the
// outcome, the error answer's code, latency_ms (a number, to the
// microsecond), bytes written and client IP; the request ID comes from
// the context. It runs outside recovery, so a panic's 500 is logged
// too. The line is written by hand for the JSON logger (logging.LogAccess):
// through slog it cost a third of a sold-out refusal.
//
// The outcome is what the route set (an order's created or replayed),
// else ok, refused (4xx) or failed (5xx); code is the JSON error code of
// a 4xx/5xx answer (sold_out, limit_exceeded, ...), absent otherwise.
func accessLog(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		if !log.Enabled(c.Request.Context(), slog.LevelInfo) {
			return // below the configured level: spare building the line (ClientIP parses headers)
		}
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		status := c.Writer.Status()
		line := logging.Access{
			Method:    c.Request.Method,
			Route:     route,
			Path:      c.Request.URL.Path,
			Status:    status,
			Outcome:   outcome(c, status),
			Code:      answerOf(c).code,
			LatencyMS: float64(time.Since(start).Microseconds()) / 1000,
			Bytes:     max(c.Writer.Size(), 0),
			IP:        c.ClientIP(),
		}
		_ = logging.LogAccess(c.Request.Context(), log, time.Now(), &line)
	}
}

func outcome(c *gin.Context, status int) string {
	if o := answerOf(c).outcome; o != "" {
		return o
	}
	switch {
	case status >= 500:
		return "failed"
	case status >= 400:
		return "refused"
	}
	return "ok"
}
