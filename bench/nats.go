package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/lock/locktest"
)

// natsServer is -events' broker: a private nats-server with JetStream on
// a free loopback port, its store in the results directory, so that the
// events side publishes as production does and the box's own server is
// left alone.
type natsServer struct {
	url string
	p   locktest.Process
}

func startNATS(ctx context.Context, dir string) (*natsServer, error) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nats-server"); err != nil {
			return nil, fmt.Errorf("-events needs nats-server (scripts/deps.sh installs it): %w", err)
		}
	}
	port, err := locktest.FreePort()
	if err != nil {
		return nil, err
	}
	s := &natsServer{url: "nats://127.0.0.1:" + strconv.Itoa(port)}
	s.p = locktest.Process{Path: bin, Log: filepath.Join(dir, "nats.log"),
		Ready: func(ctx context.Context) error { return events.Ping(ctx, s.url) },
		Args:  []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "nats-store")}}
	if err := s.p.Start(ctx, 30*time.Second); err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	return s, nil
}

// env turns the events on, relayed to this server.
func (s *natsServer) env() []string {
	return []string{"SECKILL_EVENTS_ENABLED=true", "SECKILL_EVENTS_NATS_URL=" + s.url}
}

func (s *natsServer) stop() { s.p.Kill() }
