//go:build !windows

package upgrade

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// runSignals are the signals upgrade-run passes on to its command: those
// that end a process at a terminal, and a dropped session's hangup.
var runSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// outliveClosedPipes keeps the runner alive when what reads its output
// has gone (`upgrade-run ... | head -1`): a write then fails with EPIPE
// instead of ending the runner with SIGPIPE before it recorded anything.
// The signal is caught, not ignored, so COMMAND still starts with SIGPIPE
// at its default, as any process at a shell does. It stays caught to the
// end, so that the exit code is the outcome's, not SIGPIPE's.
func outliveClosedPipes() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) }

// terminal is the controlling terminal the runner's stdin is, while the
// runner's process group holds its foreground.
type terminal struct {
	fd   int
	pgrp int // the runner's process group, which takes the foreground back
}

// terminalOf returns the terminal in is when the runner holds its
// foreground. background is true when in is the runner's terminal but
// another group holds it (the runner was started with &): the command
// cannot have it then.
func terminalOf(in io.Reader) (t *terminal, background bool) {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, false
	}
	fd := int(f.Fd())
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil { // not the runner's controlling terminal: read as a file
		return nil, false
	}
	if own := syscall.Getpgrp(); fg == own {
		return &terminal{fd: fd, pgrp: own}, false
	}
	return nil, true
}

// setProcAttr starts cmd in a process group of its own, so that a signal
// reaches everything it started, and only once; on a terminal the group
// gets the terminal's foreground, so that it can read it and the
// terminal's Ctrl-C and Ctrl-\ reach it directly, not through the runner.
func setProcAttr(cmd *exec.Cmd, t *terminal) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if t != nil {
		attr.Foreground, attr.Ctty = true, t.fd
	}
	parentDeath(attr)
	cmd.SysProcAttr = attr
}

// handedOver is called once the command's group holds the foreground. The
// runner, now in the background, ignores SIGTTOU until it takes the
// foreground back: writing to the terminal (with stty tostop) or taking it
// back would stop it otherwise. Not before: the command would inherit it.
func (t *terminal) handedOver() { signal.Ignore(syscall.SIGTTOU) }

// takeBack gives the foreground back to the runner's group once the
// command has exited, unless a live group other than the command's holds
// it (something gave it away meanwhile, which the runner must not undo).
func (t *terminal) takeBack(commandPgrp int) {
	defer signal.Reset(syscall.SIGTTOU)
	fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
	if err != nil || fg == t.pgrp {
		return
	}
	if fg != commandPgrp && !errors.Is(unix.Kill(-fg, 0), unix.ESRCH) {
		return
	}
	_ = unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgrp)
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
