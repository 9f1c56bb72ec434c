//go:build windows

package upgrade

import (
	"os"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
)

// runSignals are the signals upgrade-run passes on to its command.
var runSignals = []os.Signal{os.Interrupt}

// outliveClosedPipes: Windows has no SIGPIPE; a write to a closed pipe
// fails.
func outliveClosedPipes() {}

// continueStopped does nothing: Windows stops no command.
func continueStopped(*proc.Process, func()) <-chan error { return nil }
