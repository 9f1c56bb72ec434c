//go:build !windows

package upgrade

import (
	"os"
	"os/exec"
	"syscall"
)

// runSignals are the signals upgrade-run passes on to its command.
var runSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// ownProcessGroup starts cmd in a process group of its own, so that a
// signal reaches everything it started, and only once (a terminal's Ctrl-C
// reaches the runner, which passes it on).
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the command's process group.
func signalGroup(p *os.Process, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	if err := syscall.Kill(-p.Pid, s); err != nil {
		_ = p.Signal(sig)
	}
}

// killGroup kills the command's process group.
func killGroup(p *os.Process) { signalGroup(p, syscall.SIGKILL) }

// exitSignal returns the signal that ended the process, if one did.
func exitSignal(ps *os.ProcessState) (os.Signal, int, bool) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal(), int(ws.Signal()), true
	}
	return nil, 0, false
}
