package upgrade

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Running the step's command: signals passed on, output kept, the outcome
// summed up for the record.

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
	// gets its foreground while it runs (proc.ForegroundTerminal).
	terminal *os.File
	// timeout stops it, as --run-timeout does (0: no limit).
	timeout time.Duration
	// onStart is called with its identity, read before anything could reap
	// it, once it started; it must not block.
	onStart func(proc.Identity)
}

// execute runs the command, passes on signals (a second one kills it),
// enforces its timeout, and sums up how it ended. proc starts it in a
// process group of its own, with the terminal's foreground when it has
// one, keeps the last lines of its output, and on Linux gives it the
// parent-death signal: it cannot outlive the runner.
func execute(c command, sigs <-chan os.Signal) *runOutcome {
	out := &runOutcome{}
	select {
	case sig := <-sigs: // interrupted between the first write and the start
		out.passed, out.signal = sig, sig.String()
		out.code = exitSignalBase + signalNumber(sig)
		return out
	default:
	}
	start := time.Now()
	cmd := &proc.Cmd{Args: c.args, Stdin: c.in, Stdout: c.stdout, Stderr: c.stderr, Foreground: c.terminal,
		TailLines: runTailLines, TailBytes: runTailBytes}
	p, err := cmd.Start(context.Background()) // --run-timeout is the runner's: SIGTERM first
	if err != nil {
		out.notStarted(err)
		return out
	}
	if c.onStart != nil {
		if err := onStart(c.onStart, p.Identity()); err != nil {
			// A bug: exit 10, as any panic, and the command does not run
			// on unrecorded.
			_ = p.Signal(os.Kill)
			<-p.Done()
			out.startErr, out.code = err, int(exitcode.Internal)
			return out
		}
	}
	out.started = true
	if c.terminal != nil {
		defer watchStops(c, p)()
	}
	out.supervise(p, sigs, c.timeout)
	out.duration = time.Since(start)
	out.ended(p)
	return out
}

// supervise passes signals on to the command's group until it exits: the
// first as it came, the next as SIGKILL. At the timeout it sends SIGTERM,
// and SIGKILL runKillAfter later.
func (out *runOutcome) supervise(p *proc.Process, sigs <-chan os.Signal, timeout time.Duration) {
	var timedOut, kill <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timedOut = t.C
	}
	stopping := false // asked to stop once: the next request kills
	for {
		select {
		case sig := <-sigs:
			if stopping {
				out.killed = true
				_ = p.Signal(os.Kill)
				continue
			}
			stopping, out.passed = true, sig
			_ = p.Signal(sig)
		case <-timedOut:
			out.timedOut, stopping = true, true
			_ = p.Signal(syscall.SIGTERM)
			kill = time.After(runKillAfter)
		case <-kill:
			_ = p.Signal(os.Kill)
		case <-p.Done():
			return
		}
	}
}

// ended records how the command, reaped, ended, and its last lines.
func (out *runOutcome) ended(p *proc.Process) {
	out.tail = p.Tail()
	err := p.Wait()
	var run *proc.RunError
	errors.As(err, &run)
	ps := p.State()
	switch {
	case ps == nil: // the wait itself failed: the outcome is unknown, so a failure
		out.startErr, out.code = cause(err), 1
		if exitcode.FromError(err) == exitcode.Internal {
			out.code = int(exitcode.Internal) // it panicked: a bug
		}
		return
	case run != nil && run.Signal != nil:
		out.signal, out.code = run.Signal.String(), exitSignalBase+signalNumber(run.Signal)
	default:
		out.exit, out.code = ps.ExitCode(), ps.ExitCode()
	}
	if out.timedOut {
		out.code = exitRunTimeout // as GNU timeout: stopped is failed, whatever it exited with
	}
}

// watchStops continues the command each time it is stopped while it holds
// the terminal, and returns what waits for the watch to end once the
// command is reaped. A panic of the watch is a bug to report, not a reason
// to change the step's outcome.
func watchStops(c command, p *proc.Process) (wait func()) {
	name := c.args[0]
	watch := continueStopped(p, func() {
		fmt.Fprintf(c.stderr, "upgrade-run: %s was stopped; a step cannot be suspended while it holds the terminal, so it goes on (Ctrl-C interrupts it)\n", name)
	})
	return func() {
		if watch == nil {
			return
		}
		if err := <-watch; err != nil {
			fmt.Fprintf(c.stderr, "upgrade-run: warning: %s\n", exitcode.Message(err))
		}
	}
}

// notStarted records a command that could not start: 127 when it does not
// exist, 126 when it cannot be run, 10 when the start panicked (a bug).
func (out *runOutcome) notStarted(err error) {
	out.startErr, out.code = cause(err), exitCannotInvoke
	switch {
	case exitcode.FromError(err) == exitcode.Internal:
		out.code = int(exitcode.Internal)
	case errors.Is(err, proc.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		out.code = exitNotFound
	}
}

// cause is what went wrong in the words of the system, as the summary
// quotes it after the command's name: a RunError's Err.
func cause(err error) error {
	var run *proc.RunError
	if errors.As(err, &run) && run.Err != nil {
		return run.Err
	}
	return err
}

// onStart calls f, turning a panic into an error.
func onStart(f func(proc.Identity), id proc.Identity) (err error) {
	defer crash.Recover(func(panicked error) { err = panicked })
	f(id)
	return nil
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
