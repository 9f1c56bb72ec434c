//go:build !linux && !windows

package upgrade

import (
	"os"
	"syscall"
)

// parentDeath does nothing: only Linux has a parent-death signal, so
// elsewhere a command may outlive a runner killed with SIGKILL.
func parentDeath(*syscall.SysProcAttr) {}

// continueStopped does nothing: a command stopped with Ctrl-Z stays stopped.
// It returns no channel to wait for.
func continueStopped(*os.Process, func()) <-chan error { return nil }
