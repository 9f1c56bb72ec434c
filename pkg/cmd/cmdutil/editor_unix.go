//go:build !windows

package cmdutil

import "syscall"

// stopInTheBackground stops this program's process group, as the kernel
// stops a background job that reads its terminal (SIGTTIN), until the
// shell continues it. The kernel stops no orphaned group: it then goes on
// at once.
func stopInTheBackground() { _ = syscall.Kill(0, syscall.SIGTTIN) }
