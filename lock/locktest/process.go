package locktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrExited is a server that exited before it answered.
var ErrExited = fmt.Errorf("exited before it answered: %w", ErrGaveUp)

// Process is one server process: its output appended to Log, awaited
// until Ready answers, killed as a crash kills and started again on the
// same command line. The kernel kills it if its parent dies (on Linux).
type Process struct {
	Path string   // the binary, found on PATH
	Args []string // its arguments
	Env  []string // its environment; nil: this process's
	Log  string   // its output is appended here; the tail explains an early exit
	// Ready returns nil once the server serves.
	Ready func(context.Context) error

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited and been waited for
	status *error        // cmd's exit status, set before exited is closed
}

// Start launches the process and waits, at most timeout, until Ready
// returns nil; on error the process is killed. It fails with
// exec.ErrNotFound when Path is not installed.
func (p *Process) Start(ctx context.Context, timeout time.Duration) error {
	err := p.Launch()
	if err == nil {
		err = p.Await(ctx, timeout)
	}
	if err != nil {
		p.Kill()
	}
	return err
}

// Launch runs the process without waiting for it to serve.
func (p *Process) Launch() error {
	path, err := exec.LookPath(p.Path)
	if err != nil {
		return err
	}
	out, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, p.Args...)
	cmd.Env, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = p.Env, out, out, sysProcAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", p.Path, err)
	}
	exited, status := make(chan struct{}), new(error)
	go func() {
		*status = cmd.Wait()
		out.Close()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited, p.status = cmd, exited, status
	p.mu.Unlock()
	return nil
}

// Await waits, at most timeout, until Ready returns nil; a process that
// exits first fails at once with ErrExited and the tail of its log.
func (p *Process) Await(ctx context.Context, timeout time.Duration) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	what := fmt.Sprintf("%s (log %s)", filepath.Base(p.Path), p.Log)
	return Poll(ctx, what, timeout, 20*time.Millisecond, func(ctx context.Context) error {
		select {
		case <-exited:
			log, _ := os.ReadFile(p.Log)
			return fmt.Errorf("%w: %s", ErrExited, lastLines(log, 5))
		default:
			return p.Ready(ctx)
		}
	})
}

// lastLines returns the last n lines of a log.
func lastLines(log []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Kill sends SIGKILL (a crash: nothing is flushed, nothing handed over)
// and waits for the process to exit. A process not running is left be.
func (p *Process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

// Wait waits until the process exits, at most until ctx ends, and
// returns its exit status (an *exec.ExitError when it failed) or ctx's
// error. A process never launched has exited with nothing to say.
func (p *Process) Wait(ctx context.Context) error {
	p.mu.Lock()
	exited, status := p.exited, p.status
	p.mu.Unlock()
	if exited == nil {
		return nil
	}
	select {
	case <-exited:
		return *status
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Signal sends sig to the process (SIGSTOP freezes it, SIGCONT resumes
// it); it fails when the process does not run.
func (p *Process) Signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return errors.New("not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Alive reports whether the process runs.
func (p *Process) Alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Pid returns the process id, 0 when the process does not run.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// errSkip reports whether a T function should skip its test on err: a
// server not installed, where make test does not require it.
func errSkip(err error) bool { return errors.Is(err, exec.ErrNotFound) && !RedisAddrSet() }
