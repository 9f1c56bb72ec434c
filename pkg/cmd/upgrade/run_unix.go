//go:build !windows

package upgrade

import (
	"os"
	"os/signal"
	"syscall"
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
