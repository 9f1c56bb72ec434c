//go:build !windows

package proc

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
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

// ForegroundTerminal returns r as a terminal to hand a child
// (Cmd.Foreground): this program's controlling terminal, whose foreground
// this program's process group holds. background is true when r is that
// terminal but another group holds its foreground (this program was
// started with &): a child cannot have it then, and would be stopped
// should it read it. Any other reader (a file, a pipe, another terminal)
// is neither: the child reads it as it is.
func ForegroundTerminal(r io.Reader) (tty *os.File, background bool) {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return nil, false
	}
	fg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	if err != nil { // not this program's controlling terminal
		return nil, false
	}
	if fg == syscall.Getpgrp() {
		return f, false
	}
	return nil, true
}

// handedOver is called once the child's group holds the foreground. This
// program, now in the background, ignores SIGTTOU until it takes the
// foreground back: writing to the terminal (with stty tostop) or taking it
// back would stop it otherwise. Not before: the child would inherit it.
func handedOver() { signal.Ignore(syscall.SIGTTOU) }

// takeBack gives the foreground back to this program's group once the
// child (the leader of group child) has exited, unless a live group other
// than the child's holds it: something gave it away meanwhile, which this
// program must not undo.
func takeBack(tty *os.File, child int) {
	defer signal.Reset(syscall.SIGTTOU)
	fd, own := int(tty.Fd()), syscall.Getpgrp()
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || fg == own {
		return
	}
	if fg != child && !errors.Is(unix.Kill(-fg, 0), unix.ESRCH) {
		return
	}
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, own)
}
