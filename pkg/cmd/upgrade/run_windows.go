//go:build windows

package upgrade

import (
	"io"
	"os"
	"os/exec"
)

// runSignals are the signals upgrade-run passes on to its command.
var runSignals = []os.Signal{os.Interrupt}

// outliveClosedPipes: Windows has no SIGPIPE; a write to a closed pipe
// fails.
func outliveClosedPipes() {}

// terminal is never handed over on Windows.
type terminal struct{}

func terminalOf(io.Reader) (*terminal, bool) { return nil, false }

func setProcAttr(*exec.Cmd, *terminal) {}

func (*terminal) handedOver() {}

func (*terminal) takeBack(int) {}

func continueStopped(*os.Process, func()) <-chan error { return nil }

// signalGroup ends the command: Windows cannot deliver other signals.
func signalGroup(p *os.Process, _ os.Signal) { _ = p.Kill() }

func killGroup(p *os.Process) { _ = p.Kill() }

func exitSignal(*os.ProcessState) (os.Signal, int, bool) { return nil, 0, false }
