package handler

import (
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
)

// accessLog writes one structured line per request once it is answered:
// method, route template ("unmatched" for no route), path, status,
// latency, bytes written and client IP; the request ID comes from the
// context. It runs outside recovery, so a panic's 500 is logged too.
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
		log.LogAttrs(c.Request.Context(), slog.LevelInfo, "request",
			slog.String("method", c.Request.Method),
			slog.String("route", route),
			slog.String("path", c.Request.URL.Path),
			slog.Int("status", c.Writer.Status()),
			slog.Duration("latency", time.Since(start)),
			slog.Int("bytes", max(c.Writer.Size(), 0)),
			slog.String("ip", c.ClientIP()),
		)
	}
}
