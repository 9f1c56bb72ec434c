package upgrade

import "syscall"

// parentDeath makes the kernel kill the command when the runner dies
// without passing a signal on (SIGKILL, the OOM killer, a crash), so that
// no command runs unsupervised: SIGKILL, because the runner is gone and
// nothing would record a graceful end. It reaches the command itself, not
// what it started: those stay in its process group, which an audit or a
// retry on this node checks.
func parentDeath(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
