package agent

import (
	"os/exec"
	"syscall"
)

// supervise runs kubeadm in a process group of its own, killed as a whole
// when its phase is interrupted, and has the kernel kill it when the agent
// dies without stopping it (SIGKILL, the OOM killer): no kubeadm runs
// unsupervised, and the agent that takes the node's step over runs the
// phase again.
func supervise(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
