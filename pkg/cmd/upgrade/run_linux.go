package upgrade

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
)

// parentDeath makes the kernel kill the command when the runner dies
// without passing a signal on (SIGKILL, the OOM killer, a crash), so that
// no command runs unsupervised: SIGKILL, because the runner is gone and
// nothing would record a graceful end. It reaches the command itself, not
// what it started: those stay in its process group, which an audit or a
// retry on this node checks.
func parentDeath(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// cldStopped is siginfo's si_code for a child that stopped.
const cldStopped = 5

// continueStopped continues the command's group each time the command
// stops (Ctrl-C still ends it), until it exits, and says so. The status is
// only peeked at (WNOWAIT): exec.Cmd.Wait reaps the command. The channel
// gets a panic of the watch, if one happens, and is closed when it ends.
func continueStopped(p *os.Process, said func()) <-chan error {
	return crash.Go(func() error {
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || info.Code != cldStopped {
				return nil // exited, or reaped already
			}
			said()
			signalGroup(p, syscall.SIGCONT)
			time.Sleep(100 * time.Millisecond) // should it stay stopped, do not spin
		}
	})
}
