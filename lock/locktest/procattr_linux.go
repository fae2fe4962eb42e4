package locktest

import "syscall"

// sysProcAttr puts a server in a process group of its own, out of reach of
// the terminal's ^C (its starter stops it), and has the kernel kill it if
// its starter dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
