package app

import (
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// connWatch counts the connections the HTTP server closes, by the state
// each was in, because net/http closes two kinds silently (nothing reaches
// http.Server.ErrorLog):
//
//   - "new": the connection sent no complete request header within
//     http.read_header_timeout, counted from when the server starts reading
//     it, or the client left before asking anything. A client pool that
//     dials a connection and leaves it unused for longer than that finds it
//     closed: Go's Transport reports EOF for the first request on such a
//     connection and does not retry it (it retries only reused ones).
//   - "active": closed during or right after a request: "Connection:
//     close", a handler past http.write_timeout, or a panic net/http caught.
//
// "idle" is a kept-alive connection closed by the client, by
// http.idle_timeout or by shutdown. The series is
// seckill_http_connections_closed_total{state}; closes before a first
// request are also logged at debug level (remote addresses only, no
// request data).
type connWatch struct {
	closed *prometheus.CounterVec
	log    *slog.Logger

	mu    sync.Mutex
	state map[net.Conn]http.ConnState
}

func newConnWatch(log *slog.Logger) *connWatch {
	return &connWatch{
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_connections_closed_total",
			Help: "HTTP connections closed, by the state they were in (new: before a first request, e.g. http.read_header_timeout; active; idle).",
		}, []string{"state"}),
		log:   log,
		state: make(map[net.Conn]http.ConnState),
	}
}

// hook is the http.Server.ConnState callback.
func (w *connWatch) hook(c net.Conn, st http.ConnState) {
	w.mu.Lock()
	prev, known := w.state[c]
	if st == http.StateClosed || st == http.StateHijacked {
		delete(w.state, c)
	} else {
		w.state[c] = st
	}
	w.mu.Unlock()
	if st != http.StateClosed || !known {
		return
	}
	w.closed.WithLabelValues(prev.String()).Inc()
	if prev == http.StateNew {
		w.log.Debug("http connection closed before its first request (read header timeout or client left)", "remote", c.RemoteAddr().String())
	}
}
