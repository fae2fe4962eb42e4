//go:build !linux

package locktest

import "syscall"

// sysProcAttr is nothing special where there is no Pdeathsig.
func sysProcAttr() *syscall.SysProcAttr { return nil }
