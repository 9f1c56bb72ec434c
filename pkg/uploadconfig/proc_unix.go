//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package uploadconfig

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup runs cmd in a process group of its own, which a timeout
// kills whole: a kubeadm started by a wrapper script is stopped with it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
