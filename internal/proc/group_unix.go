//go:build !windows

package proc

import (
	"os"
	"os/exec"
	"syscall"
)

// supervise starts cmd in a process group of its own, killed whole when
// its context ends; with a terminal, the group takes its foreground.
func supervise(cmd *exec.Cmd, terminal *os.File) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if terminal != nil {
		attr.Foreground, attr.Ctty = true, int(terminal.Fd())
	}
	parentDeath(attr)
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return signalGroup(cmd.Process, syscall.SIGKILL) }
}

// signalGroup sends sig to p's process group, or to p alone should the
// group be gone.
func signalGroup(p *os.Process, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	if err := syscall.Kill(-p.Pid, s); err != nil {
		return p.Signal(sig)
	}
	return nil
}

// exitSignal is the signal that ended a child, if one did.
func exitSignal(ps *os.ProcessState) (os.Signal, bool) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal(), true
	}
	return nil, false
}
