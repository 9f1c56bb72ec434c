//go:build !windows

package upgrade

import (
	"os"
	"os/exec"
	"syscall"
)

// runSignals are the signals upgrade-run passes on to its command: those
// that end a process at a terminal, and a dropped session's hangup.
var runSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// setProcAttr starts cmd in a process group of its own, so that a signal
// reaches everything it started, and only once (a terminal's Ctrl-C
// reaches the runner, which passes it on).
func setProcAttr(cmd *exec.Cmd) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	parentDeath(attr)
	cmd.SysProcAttr = attr
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
