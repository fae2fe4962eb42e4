package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one child process the run started: an instance or k6 (the
// servers are locktest's, zktest's and mariadb's). It can be killed and started again with the same
// command line, which is how faults are injected.
type proc struct {
	name string
	path string
	args []string
	env  []string
	log  string // file the output is appended to

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd's exit status, once done is closed
}

// procs is the registry of every child, so that stopAll can end them all
// however the run ends.
type procs struct {
	mu   sync.Mutex
	list []*proc
}

func (ps *procs) add(p *proc) *proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.list = append(ps.list, p)
	return p
}

// stopAll stops every child, newest first, each with SIGTERM then SIGKILL
// after grace.
func (ps *procs) stopAll(grace time.Duration) {
	ps.mu.Lock()
	list := append([]*proc(nil), ps.list...)
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for i := len(list) - 1; i >= 0; i-- {
		wg.Add(1)
		go func(p *proc) {
			defer wg.Done()
			p.stop(grace)
		}(list[i])
	}
	wg.Wait()
}

// start launches the process. Its process group is its own, so that a
// kill reaches its children too, and the kernel kills it if the runner
// dies without cleaning up.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isDone(p.done) {
		return fmt.Errorf("%s: already running", p.name)
	}
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	fmt.Fprintf(out, "--- %s start %s\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("%s: start %s: %w", p.name, p.path, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		out.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// running reports whether the process is alive, and its exit error if not.
func (p *proc) running() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false, errors.New("never started")
	}
	if isDone(p.done) {
		return false, p.err
	}
	return true, nil
}

// signal sends sig to the process group and waits up to wait for the exit.
// It reports whether the process is gone.
func (p *proc) signal(sig syscall.Signal, wait time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isDone(done) {
		return true
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig) // the group may be gone already
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// kill is the fault: SIGKILL, no goodbye.
func (p *proc) kill() error {
	if !p.signal(syscall.SIGKILL, 10*time.Second) {
		return fmt.Errorf("%s: still running 10s after SIGKILL", p.name)
	}
	return nil
}

// stop asks politely, then insists.
func (p *proc) stop(grace time.Duration) {
	if !p.signal(syscall.SIGTERM, grace) {
		p.signal(syscall.SIGKILL, 10*time.Second)
	}
}

// waitExit waits for the process to end on its own, up to ctx.
func (p *proc) waitExit(ctx context.Context) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
