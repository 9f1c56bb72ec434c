package proc

import (
	"io"
	"os"
	"os/exec"
)

// supervise leaves the child as exec starts it: Windows has no process
// groups to signal; the context's end kills the child.
func supervise(*exec.Cmd, *os.File) {}

// signalGroup ends the child: Windows cannot deliver other signals.
func signalGroup(p *os.Process, _ os.Signal) error { return p.Kill() }

func exitSignal(*os.ProcessState) (os.Signal, bool) { return nil, false }

// ForegroundTerminal finds no terminal to hand over on Windows, which has
// no process groups: the child shares the console.
func ForegroundTerminal(io.Reader) (tty *os.File, background bool) { return nil, false }

func handedOver() {}

func takeBack(*os.File, int) {}
