package upgrade

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// cldStopped is siginfo's si_code for a child that stopped.
const cldStopped = 5

// continueStopped continues the command's group each time the command
// stops (Ctrl-C still ends it), until it exits, and says so. The status is
// only peeked at (WNOWAIT): proc reaps the command. The channel
// gets a panic of the watch, if one happens, and is closed when it ends.
func continueStopped(p *proc.Process, said func()) <-chan error {
	return crash.Go(func() error {
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PID, p.PID(), &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || info.Code != cldStopped {
				return nil // exited, or reaped already
			}
			said()
			_ = p.Signal(syscall.SIGCONT)
			time.Sleep(100 * time.Millisecond) // should it stay stopped, do not spin
		}
	})
}
