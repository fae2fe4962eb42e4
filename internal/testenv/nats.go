package testenv

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/lock/locktest"
)

// NATSServer is a private nats-server with JetStream on a free loopback
// port, its store in the test's temporary directory: a restart keeps
// what it stored. Debian's nats-server package installs it in /usr/sbin
// (scripts/deps.sh).
type NATSServer struct {
	URL string
	t   testing.TB
	p   locktest.Process
}

// StartNATS starts the server, killed when the test ends. Without
// nats-server the test is skipped.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nats-server"); err != nil {
			t.Skip("nats-server not installed (scripts/deps.sh installs it)")
		}
	}
	dir := t.TempDir()
	port := strconv.Itoa(FreePort(t))
	s := &NATSServer{URL: "nats://127.0.0.1:" + port, t: t}
	s.p = locktest.Process{Path: bin, Log: filepath.Join(dir, "nats.log"), Ready: s.ready,
		Args: []string{"-a", "127.0.0.1", "-p", port, "-js", "-sd", filepath.Join(dir, "store")}}
	s.Start()
	t.Cleanup(s.p.Kill)
	return s
}

// Start starts the server again on its port and store, and waits until
// JetStream answers.
func (s *NATSServer) Start() {
	s.t.Helper()
	if err := s.p.Start(context.Background(), 30*time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// Stop kills the server (SIGKILL, as a crash) and waits for it to exit.
func (s *NATSServer) Stop() { s.p.Kill() }

// ready reports whether JetStream answers.
func (s *NATSServer) ready(ctx context.Context) error { return events.Ping(ctx, s.URL) }
