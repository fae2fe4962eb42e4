package app

import (
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestConnWatch_CountsWhatNetHTTPClosesSilently: a connection that sends
// nothing is closed by the read header timeout in state new, and one whose
// handler aborts is closed in state active; net/http logs neither.
func TestConnWatch_CountsWhatNetHTTPClosesSilently(t *testing.T) {
	w := newConnWatch(slog.New(slog.DiscardHandler))
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }),
		ReadHeaderTimeout: 200 * time.Millisecond,
		ConnState:         w.hook,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitClosed(t, w, "new", 1)

	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET on an aborting handler = %d; want the connection dropped", resp.StatusCode)
	}
	waitClosed(t, w, "active", 1)
	if n := closedIn(w, "idle"); n != 0 {
		t.Errorf("idle closes = %v; want 0", n)
	}
}

// waitClosed polls the counter of state until it reaches want, bounded.
func waitClosed(t *testing.T, w *connWatch, state string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for closedIn(w, state) != want {
		if time.Now().After(deadline) {
			t.Fatalf("connections closed in state %s = %v; want %v", state, closedIn(w, state), want)
		}
		time.Sleep(5 * time.Millisecond) // polling observable state, bounded above
	}
}

// closedIn reads the counter of state.
func closedIn(w *connWatch, state string) float64 {
	var m dto.Metric
	_ = w.closed.WithLabelValues(state).Write(&m) // a counter always writes
	return m.GetCounter().GetValue()
}
