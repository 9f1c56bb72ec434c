//go:build !linux && !windows

package proc

import "syscall"

// parentDeath: only Linux has a parent-death signal.
func parentDeath(*syscall.SysProcAttr) {}
