package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/seckill/seckill/internal/testenv/natsserver"
)

// NATSServer is a private nats-server with JetStream on a free loopback
// port, its store in the test's temporary directory: a restart keeps
// what it stored.
type NATSServer struct {
	*natsserver.Server
	t testing.TB
}

// StartNATS starts the server, killed when the test ends. Without
// nats-server the test is skipped.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	s, err := natsserver.Start(context.Background(), t.TempDir())
	if errors.Is(err, natsserver.ErrNotInstalled) {
		t.Skip(err)
	}
	if s != nil {
		t.Cleanup(s.Kill)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &NATSServer{Server: s, t: t}
}

// Start starts the server again on its port and store, and waits until
// JetStream answers.
func (s *NATSServer) Start() {
	s.t.Helper()
	if err := s.Restart(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// Stop kills the server (SIGKILL, as a crash) and waits for it to exit.
func (s *NATSServer) Stop() { s.Kill() }
