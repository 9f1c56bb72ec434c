//go:build windows

package upgrade

import (
	"os"
	"os/exec"
)

// runSignals are the signals upgrade-run passes on to its command.
var runSignals = []os.Signal{os.Interrupt}

func setProcAttr(*exec.Cmd) {}

// signalGroup ends the command: Windows cannot deliver other signals.
func signalGroup(p *os.Process, _ os.Signal) { _ = p.Kill() }

func killGroup(p *os.Process) { _ = p.Kill() }

func exitSignal(*os.ProcessState) (os.Signal, int, bool) { return nil, 0, false }
