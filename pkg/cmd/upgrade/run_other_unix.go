//go:build !linux && !windows

package upgrade

import "syscall"

// parentDeath does nothing: only Linux has a parent-death signal, so
// elsewhere a command may outlive a runner killed with SIGKILL.
func parentDeath(*syscall.SysProcAttr) {}
