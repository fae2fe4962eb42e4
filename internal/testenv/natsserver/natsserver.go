// Package natsserver starts a private nats-server with JetStream for the
// tests (testenv.StartNATS), the bench and the load test: a free loopback
// port, its store in a directory of the caller's, so that a restart keeps
// what it stored and the box's own server is left alone.
package natsserver

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/lock/locktest"
)

// ErrNotInstalled is Start's error without nats-server (Debian's package
// installs it in /usr/sbin; scripts/deps.sh installs it).
var ErrNotInstalled = errors.New("nats-server not installed (scripts/deps.sh installs it)")

// Server is one private nats-server.
type Server struct {
	URL string // nats://127.0.0.1:port
	p   locktest.Process
}

// Start starts a server whose log and store are in dir, and waits until
// JetStream answers.
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nats-server"); err != nil {
			return nil, ErrNotInstalled
		}
	}
	port, err := locktest.FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "nats://127.0.0.1:" + strconv.Itoa(port)}
	s.p = locktest.Process{Path: bin, Log: filepath.Join(dir, "nats.log"),
		Ready: func(ctx context.Context) error { return events.Ping(ctx, s.URL) },
		Args:  []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "nats-store")}}
	return s, s.Restart(ctx)
}

// Restart starts the server again on its port and store (after Kill) and
// waits until JetStream answers.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.p.Start(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("nats-server: %w", err)
	}
	return nil
}

// Kill SIGKILLs the server, as a crash, and waits for it to exit.
func (s *Server) Kill() { s.p.Kill() }

// Pid is the server's process id (for its CPU), 0 before it started.
func (s *Server) Pid() int { return s.p.Pid() }

// Env is a service instance's environment that turns the order events
// on, relayed to this server.
func (s *Server) Env() []string {
	return []string{"SECKILL_EVENTS_ENABLED=true", "SECKILL_EVENTS_NATS_URL=" + s.URL}
}
