package proc

import "syscall"

// parentDeath makes the kernel kill the child when this program dies
// without stopping it (SIGKILL, the OOM killer, a crash): SIGKILL, since
// nothing would record a graceful end. It reaches the child itself, not
// what it started: those stay in its process group, which Identity lets a
// later program check.
func parentDeath(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
