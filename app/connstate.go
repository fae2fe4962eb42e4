package app

import (
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// connWatch counts the connections the HTTP server closes, by the state
// each was in (seckill_http_connections_closed_total), because net/http
// closes some silently: "new" ones that sent no header within
// http.read_header_timeout (a pooling client then gets an unretried EOF)
// and "active" ones cut mid-request. Closes before a first request are
// also logged at debug level.
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
