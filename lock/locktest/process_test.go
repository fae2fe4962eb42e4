package locktest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcess_waitSignalEnv checks that a process gets Env, that Signal
// reaches it and that Wait returns its exit status.
func TestProcess_waitSignalEnv(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	p := &Process{Path: "sh", Args: []string{"-c", `echo "$GREETING"; trap 'exit 3' TERM; while :; do sleep 0.01; done`},
		Env: []string{"GREETING=hello"}, Log: log}
	if err := p.Launch(); err != nil {
		t.Skipf("sh: %v", err)
	}
	t.Cleanup(p.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(running) = %v; want context.DeadlineExceeded", err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM) = %v", err)
	}
	var exit *exec.ExitError
	if err := p.Wait(context.Background()); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("Wait(after SIGTERM) = %v; want exit status 3", err)
	}
	if out, _ := os.ReadFile(log); !strings.Contains(string(out), "hello") {
		t.Errorf("log = %q; want the GREETING of Env", out)
	}
}
