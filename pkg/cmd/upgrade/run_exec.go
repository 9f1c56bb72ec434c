package upgrade

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Running the step's command: signals passed on, output kept, the outcome
// summed up for the record.

// errNotStarted tells execute that the goroutine starting the command
// ended by a panic before it could say how the start went.
var errNotStarted = errors.New("the command was not started")

// The runner's own exit codes, as GNU timeout and the shells use them.
const (
	exitRunTimeout   = 124 // --run-timeout passed and the command was stopped
	exitCannotInvoke = 126 // the command exists but cannot be run
	exitNotFound     = 127 // no such command
	exitSignalBase   = 128 // + the signal that ended the command
	runKillAfter     = 10 * time.Second
	runTailLines     = 5
	runTailBytes     = 512
)

// runOutcome is how the command ended.
type runOutcome struct {
	started  bool
	startErr error
	exit     int    // the command's exit status, when it exited
	signal   string // the signal that ended it
	timedOut bool
	passed   os.Signal // a signal passed on from the runner
	killed   bool      // a second signal made the runner kill it
	code     int       // the runner's exit code
	duration time.Duration
	tail     string
}

// command is the step's command and where its input and output go.
type command struct {
	args []string
	// in is its standard input; nil is the null device.
	in             io.Reader
	stdout, stderr io.Writer
	// terminal, when set, is the terminal in is: the command's process group
	// gets its foreground while it runs.
	terminal *terminal
	// timeout stops it, as --run-timeout does (0: no limit).
	timeout time.Duration
	// onStart is called with its pid once it started, before anything can
	// reap it; it must not block.
	onStart func(pid int)
}

// execute runs the command in its own process group (with the terminal's
// foreground when it has one), passes on signals (a second one kills it),
// enforces its timeout, and keeps the last lines of its output. On Linux
// the command gets a parent-death signal: it cannot outlive the runner.
func execute(c command, sigs <-chan os.Signal) *runOutcome {
	out := &runOutcome{}
	select {
	case sig := <-sigs: // interrupted between the first write and the start
		out.passed, out.signal = sig, sig.String()
		out.code = exitSignalBase + signalNumber(sig)
		return out
	default:
	}
	tail := &upgradestate.Tail{}
	cmd := exec.Command(c.args[0], c.args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.in, io.MultiWriter(c.stdout, tail), io.MultiWriter(c.stderr, tail)
	cmd.WaitDelay = 5 * time.Second // a child that keeps the output open cannot hold the runner
	setProcAttr(cmd, c.terminal)
	start := time.Now()
	// started gets one value whatever happens, a panic included: the start's
	// error, nil, or errNotStarted, after which done has the panic.
	started := make(chan error, 1)
	done := crash.Go(func() error {
		// The parent-death signal comes when the thread that started the
		// command ends, not the runner: this goroutine keeps its thread
		// until the command has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		sent := false
		defer func() {
			if !sent {
				started <- errNotStarted
			}
		}()
		err := cmd.Start()
		if err == nil && c.onStart != nil {
			c.onStart(cmd.Process.Pid)
		}
		sent = true
		started <- err
		if err != nil {
			return nil
		}
		return cmd.Wait()
	})
	if err := <-started; err != nil {
		if errors.Is(err, errNotStarted) {
			// A panic (a bug) stopped the start: exit 10, as any panic.
			out.startErr, out.code = <-done, int(exitcode.Internal)
			return out
		}
		out.startErr, out.code = err, exitCannotInvoke
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			out.code = exitNotFound
		}
		return out
	}
	out.started = true
	var stopWatch <-chan error
	if c.terminal != nil {
		c.terminal.handedOver()
		defer c.terminal.takeBack(cmd.Process.Pid)
		name := c.args[0]
		stopWatch = continueStopped(cmd.Process, func() {
			fmt.Fprintf(c.stderr, "upgrade-run: %s was stopped; a step cannot be suspended while it holds the terminal, so it goes on (Ctrl-C interrupts it)\n", name)
		})
	}
	defer func() {
		// It ends once the command is reaped; a panic of it is a bug to
		// report, not a reason to change the step's outcome.
		if stopWatch == nil {
			return
		}
		if err := <-stopWatch; err != nil {
			fmt.Fprintf(c.stderr, "upgrade-run: warning: %s\n", exitcode.Message(err))
		}
	}()
	var timeout, kill <-chan time.Time
	if c.timeout > 0 {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		timeout = t.C
	}
	var waitErr error
	stopping := false // asked to stop once: the next request kills
wait:
	for {
		select {
		case sig := <-sigs:
			if stopping {
				out.killed = true
				killGroup(cmd.Process)
				continue
			}
			stopping, out.passed = true, sig
			signalGroup(cmd.Process, sig)
		case <-timeout:
			out.timedOut, stopping = true, true
			signalGroup(cmd.Process, syscall.SIGTERM)
			kill = time.After(runKillAfter)
		case <-kill:
			killGroup(cmd.Process)
		case waitErr = <-done:
			break wait
		}
	}
	out.duration = time.Since(start)
	out.tail = tail.Last(runTailLines, runTailBytes)
	ps := cmd.ProcessState
	if ps == nil { // the wait itself failed: the outcome is unknown, so a failure
		out.startErr, out.code = waitErr, 1
		if exitcode.FromError(waitErr) == exitcode.Internal {
			out.code = int(exitcode.Internal) // it panicked: a bug
		}
		return out
	}
	if sig, n, ok := exitSignal(ps); ok {
		out.signal, out.code = sig.String(), exitSignalBase+n
	} else {
		out.exit, out.code = ps.ExitCode(), ps.ExitCode()
	}
	if out.timedOut {
		out.code = exitRunTimeout // as GNU timeout: stopped is failed, whatever it exited with
	}
	return out
}

// summary says in a few words how the command ended.
func (out *runOutcome) summary(command []string) string {
	name := command[0]
	switch {
	case out.started && out.startErr != nil:
		return fmt.Sprintf("%s: the runner lost track of it: %s", name, out.startErr)
	case out.startErr != nil:
		return fmt.Sprintf("%s could not start: %s", name, out.startErr)
	case !out.started:
		return fmt.Sprintf("%s was not started: the runner got %s first", name, out.signal)
	case out.timedOut:
		return fmt.Sprintf("%s did not finish within --run-timeout and was stopped after %s", name, out.duration.Round(time.Second))
	case out.signal != "":
		by := ""
		switch {
		case out.killed && out.passed != nil:
			by = fmt.Sprintf(" (%s passed on from the runner, then killed at a second signal)", out.passed)
		case out.killed:
			by = " (killed by the runner at a second signal)"
		case out.passed != nil:
			by = fmt.Sprintf(" (%s passed on from the runner)", out.passed)
		}
		return fmt.Sprintf("%s was killed by signal %s%s after %s", name, out.signal, by, out.duration.Round(time.Second))
	case out.code == 0:
		return fmt.Sprintf("%s succeeded in %s", name, out.duration.Round(time.Second))
	}
	return fmt.Sprintf("%s exited %d after %s", name, out.exit, out.duration.Round(time.Second))
}

// reason is what is recorded: the summary and the last lines of output.
func (out *runOutcome) reason(command []string) string {
	r := "upgrade-run: " + out.summary(command)
	if out.tail != "" {
		r += "; last output: " + out.tail
	}
	return upgradestate.BoundReason(r)
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGTERM)
}

// runID names one run: who, which process, and a random part, so that two
// runs never share a heartbeat.
func runID(identity string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", identity, os.Getpid(), hex.EncodeToString(b))
}

// commandLine shows a command as a shell would take it back.
func commandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}
