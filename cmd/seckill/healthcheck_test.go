package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	cases := []struct {
		name    string
		addr    string
		status  int
		wantErr bool
	}{
		{"ready", "127.0.0.1:" + port, http.StatusOK, false},
		{"wildcard listen address", "0.0.0.0:" + port, http.StatusOK, false},
		{"no host", ":" + port, http.StatusOK, false},
		{"unavailable", "127.0.0.1:" + port, http.StatusServiceUnavailable, true},
		{"nothing listening", closedAddr, http.StatusOK, true},
		{"bad address", "no-port", http.StatusOK, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status.Store(int32(tc.status))
			err := healthcheck(t.Context(), tc.addr)
			if (err != nil) != tc.wantErr {
				t.Errorf("healthcheck(%q) with /readyz %d = %v; want error %v", tc.addr, tc.status, err, tc.wantErr)
			}
		})
	}
}
