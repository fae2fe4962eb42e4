// Package logging builds the service's log/slog logger: JSON or text, with
// the request ID (and a traced request's trace ID) of the context on every
// line logged with a context, durations written as strings such as
// "12.345ms", and no attribute that repeats a key of the record itself
// (time, level, msg, source).
package logging

import (
	"context"
	"io"
	"log/slog"
	"time"
)

type idsKey struct{}

// ids are the keys to a request's lines: its request ID and, when its
// trace is recorded, the trace's ID. One context value holds both, so
// that an untraced request looks up one value, as before tracing.
type ids struct{ request, trace string }

// WithRequestID returns ctx carrying id, which every line logged with ctx shows.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, idsKey{}, &ids{request: id})
}

// WithTraceID returns ctx carrying the ID of the request's recorded
// trace (32 hex digits) beside its request ID: every line logged with
// ctx shows it as trace_id.
func WithTraceID(ctx context.Context, trace string) context.Context {
	return context.WithValue(ctx, idsKey{}, &ids{request: RequestID(ctx), trace: trace})
}

// RequestID returns the request ID carried by ctx, or "".
func RequestID(ctx context.Context) string {
	request, _ := IDs(ctx)
	return request
}

// IDs returns the request ID and the trace ID carried by ctx, each ""
// when ctx carries none.
func IDs(ctx context.Context) (request, trace string) {
	if v, ok := ctx.Value(idsKey{}).(*ids); ok {
		return v.request, v.trace
	}
	return "", ""
}

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error"; anything else is info) as "json" or "text".
func New(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: readable}
	if format == "text" {
		return slog.New(contextHandler{Handler: slog.NewTextHandler(w, opts)})
	}
	out := &lockedWriter{w: w}
	return slog.New(contextHandler{Handler: slog.NewJSONHandler(out, opts), out: out})
}

// readable writes durations as Go duration strings rounded to the
// microsecond ("12.345ms", "3s"), not as integer nanoseconds.
func readable(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		d := a.Value.Duration()
		if d > time.Microsecond || d < -time.Microsecond {
			d = d.Round(time.Microsecond)
		}
		return slog.String(a.Key, d.String())
	}
	return a
}

// reserved are the keys of a record's own fields: an attribute with one
// of them would repeat the key on the line.
var reserved = map[string]string{
	slog.TimeKey:    "attr_time",
	slog.LevelKey:   "attr_level",
	slog.MessageKey: "attr_msg",
	slog.SourceKey:  "attr_source",
}

// contextHandler adds a context's IDs to each line. out is the writer
// of the JSON handler New made, nil once attributes or a group are
// added: LogAccess writes by hand only what that handler would write.
type contextHandler struct {
	slog.Handler
	out *lockedWriter
}

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	clash := false
	r.Attrs(func(a slog.Attr) bool {
		_, clash = reserved[a.Key]
		return !clash
	})
	if clash {
		out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			if k, ok := reserved[a.Key]; ok {
				a.Key = k
			}
			out.AddAttrs(a)
			return true
		})
		r = out
	}
	request, trace := IDs(ctx)
	if request != "" {
		r.AddAttrs(slog.String("request_id", request))
	}
	if trace != "" {
		r.AddAttrs(slog.String("trace_id", trace))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		if k, ok := reserved[a.Key]; ok {
			a.Key = k
		}
		out[i] = a
	}
	return contextHandler{Handler: h.Handler.WithAttrs(out)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{Handler: h.Handler.WithGroup(name)}
}
