// Package proc is the one way the project starts a child process: kubeadm,
// the kubelet's restart command, an editor, upgrade-run's COMMAND. Every
// child runs in a process group of its own, which a timeout, an ended
// context or Signal reaches whole; on Linux the kernel kills it should the
// program die without stopping it (the parent-death signal), so that no
// child runs unsupervised. What it prints is kept as a bounded Tail, and a
// failure is one error type, RunError, carrying the command, how it ended
// and its last lines. Identity names a process so that a later program on
// the same node can tell whether it still runs.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
)

// Cmd is a child process to run. Args is required; the zero value of every
// other field is a child with this program's environment, no input, and
// its output kept in the tail alone.
type Cmd struct {
	// Args is the command and its arguments; Args[0] is looked up in PATH
	// when it holds no slash.
	Args []string
	// Env is added to this program's environment (KEY=VALUE).
	Env []string
	// Stdin is the child's standard input; nil is the null device.
	Stdin io.Reader
	// Stdout and Stderr receive the output as it comes, besides the tail;
	// nil keeps it in the tail only.
	Stdout, Stderr io.Writer
	// MaxStdout stops the child once its standard output passes this many
	// bytes (RunError.TooLarge); 0 is no bound. What Stdout receives is
	// not cut.
	MaxStdout int
	// Timeout stops the child after it (RunError.TimedOut); 0 leaves it to
	// the context.
	Timeout time.Duration
	// Foreground, when set, is the controlling terminal whose foreground
	// the child's process group takes when it starts (Unix), so that it can
	// read it and the terminal's signals reach it directly.
	Foreground *os.File
	// TailLines and TailBytes bound RunError.Tail and Process.Tail's
	// default (DefaultTailLines, DefaultTailBytes when 0).
	TailLines, TailBytes int
}

// The bounds of what a failure quotes of a child's output by default: its
// last lines, which say why.
const (
	DefaultTailLines = 5
	DefaultTailBytes = 512
)

// Command is a Cmd of name and args.
func Command(name string, args ...string) *Cmd {
	return &Cmd{Args: append([]string{name}, args...)}
}

// Process is a started child.
type Process struct {
	cmd      *Cmd
	ecmd     *exec.Cmd
	identity Identity
	tail     *Tail // both outputs
	errTail  *Tail // the standard error alone: the flood a TooLarge child printed is not quoted
	stdout   *capped
	start    time.Time
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	err      error // of the wait, once done is closed
}

// Start starts c. The child is stopped (its whole process group killed)
// when ctx ends or c.Timeout passes. On Linux it gets the parent-death
// signal: the goroutine that started it keeps its thread until it exits,
// since the kernel sends the signal when that thread ends.
func (c *Cmd) Start(ctx context.Context) (*Process, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("proc: no command")
	}
	p := &Process{cmd: c, tail: &Tail{}, errTail: &Tail{}, start: time.Now(), done: make(chan struct{})}
	if c.Timeout > 0 {
		p.ctx, p.cancel = context.WithTimeout(ctx, c.Timeout)
	} else {
		p.ctx, p.cancel = context.WithCancel(ctx)
	}
	cmd := exec.CommandContext(p.ctx, c.Args[0], c.Args[1:]...)
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Stdin = c.Stdin
	var stdout io.Writer = p.tail
	if c.MaxStdout > 0 {
		p.stdout = &capped{max: c.MaxStdout, full: p.cancel}
		stdout = io.MultiWriter(p.stdout, p.tail)
	}
	cmd.Stdout, cmd.Stderr = tee(c.Stdout, stdout), tee(c.Stderr, io.MultiWriter(p.tail, p.errTail))
	cmd.WaitDelay = 5 * time.Second // a grandchild that keeps the output open cannot hold the caller
	supervise(cmd, c.Foreground)
	p.ecmd = cmd

	started := make(chan error, 1)
	waited := crash.Go(func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		sent := false
		defer func() {
			if !sent {
				started <- errors.New("proc: the start panicked")
			}
		}()
		err := cmd.Start()
		sent = true
		started <- err
		if err != nil {
			return nil
		}
		return cmd.Wait()
	})
	if err := <-started; err != nil {
		p.cancel()
		<-waited
		return nil, &RunError{Command: c.Args, ExitCode: -1, Err: err, NotStarted: true}
	}
	p.identity = Describe(cmd.Process.Pid)
	go func() {
		p.err = <-waited
		close(p.done)
	}()
	return p, nil
}

func tee(w, tail io.Writer) io.Writer {
	if w == nil {
		return tail
	}
	return io.MultiWriter(w, tail)
}

// Identity names the started child for a later look at whether it runs.
func (p *Process) Identity() Identity { return p.identity }

// PID is the child's process id, also its process group's.
func (p *Process) PID() int { return p.ecmd.Process.Pid }

// Done is closed once the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the child's whole process group.
func (p *Process) Signal(sig os.Signal) error { return signalGroup(p.ecmd.Process, sig) }

// Tail is the end of what the child printed, as RunError quotes it.
func (p *Process) Tail() string { return p.tail.Last(p.tailLines(), p.tailBytes()) }

// State is how the child ended; nil before Done, or when it was not
// reaped.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.ecmd.ProcessState
	default:
		return nil
	}
}

// Wait waits for the child to exit and returns nil when it exited 0 (and
// printed no more than MaxStdout), a *RunError otherwise.
func (p *Process) Wait() error {
	<-p.done
	defer p.cancel()
	timedOut := errors.Is(p.ctx.Err(), context.DeadlineExceeded) && p.cmd.Timeout > 0 && time.Since(p.start) >= p.cmd.Timeout
	tooLarge := p.stdout != nil && p.stdout.overflow
	if p.err == nil && !tooLarge {
		return nil
	}
	e := &RunError{Command: p.cmd.Args, ExitCode: -1, Err: p.err, Tail: p.Tail(),
		TimedOut: timedOut, Timeout: p.cmd.Timeout, TooLarge: tooLarge, MaxStdout: p.cmd.MaxStdout}
	if tooLarge {
		e.Tail = p.errTail.Last(p.tailLines(), p.tailBytes())
	}
	var exit *exec.ExitError
	switch {
	case timedOut || tooLarge:
	case p.ctx.Err() != nil:
		e.Interrupted = true
	case errors.As(p.err, &exit):
		if exit.Exited() {
			e.ExitCode = exit.ExitCode()
		} else if sig, ok := exitSignal(exit.ProcessState); ok {
			e.Signal = sig
		}
	}
	return e
}

// Stdout is what the child printed on its standard output, when MaxStdout
// was set.
func (p *Process) Stdout() string {
	if p.stdout == nil {
		return ""
	}
	return p.stdout.String()
}

func (p *Process) tailLines() int { return cmp(p.cmd.TailLines, DefaultTailLines) }
func (p *Process) tailBytes() int { return cmp(p.cmd.TailBytes, DefaultTailBytes) }

func cmp(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// Run starts c and waits for it.
func (c *Cmd) Run(ctx context.Context) error {
	p, err := c.Start(ctx)
	if err != nil {
		return err
	}
	return p.Wait()
}

// Output runs c and returns its standard output, bounded by MaxStdout
// (DefaultMaxOutput when 0).
func (c *Cmd) Output(ctx context.Context) (string, error) {
	cc := *c
	if cc.MaxStdout <= 0 {
		cc.MaxStdout = DefaultMaxOutput
	}
	p, err := cc.Start(ctx)
	if err != nil {
		return "", err
	}
	err = p.Wait()
	return p.Stdout(), err
}

// DefaultMaxOutput bounds what Output keeps of a child's standard output.
const DefaultMaxOutput = 4 << 20

// RunError is a child that did not succeed: it could not start, was
// stopped, or exited other than 0. Its message names the command line
// without its flags, how it ended and its last lines.
type RunError struct {
	// Command is the command line as run.
	Command []string
	// ExitCode is the child's, or -1 when it did not exit by itself.
	ExitCode int
	// NotStarted: it could not be started (Err says why).
	NotStarted bool
	// Signal is the signal that ended it, when one did.
	Signal os.Signal
	// TimedOut: it was stopped after Timeout.
	TimedOut bool
	Timeout  time.Duration
	// Interrupted: it was stopped because its context ended.
	Interrupted bool
	// TooLarge: it printed more than MaxStdout bytes and was stopped.
	TooLarge  bool
	MaxStdout int
	// Tail is its last lines, joined with " | ".
	Tail string
	Err  error
}

func (e *RunError) Error() string {
	msg := e.Name() + " " + e.How()
	if e.Tail != "" {
		msg += ": " + e.Tail
	}
	return msg
}

// How says in a few words how the child ended.
func (e *RunError) How() string {
	switch {
	case e.NotStarted:
		return fmt.Sprintf("could not start: %v", e.Err)
	case e.TooLarge:
		return fmt.Sprintf("printed more than %d bytes and was stopped", e.MaxStdout)
	case e.TimedOut:
		return fmt.Sprintf("did not finish within %s", e.Timeout)
	case e.Interrupted:
		return "was interrupted"
	case e.Signal != nil:
		return fmt.Sprintf("was killed by signal %s", e.Signal)
	case e.ExitCode >= 0:
		return fmt.Sprintf("exited %d", e.ExitCode)
	}
	return fmt.Sprintf("failed: %v", e.Err)
}

// Name is the command line up to its first flag: what it was asked to do
// ("kubeadm upgrade node phase kubelet-config").
func (e *RunError) Name() string { return strings.Join(Words(e.Command), " ") }

func (e *RunError) Unwrap() error { return e.Err }

// Words are a command line's words before its first flag.
func Words(args []string) []string {
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			return args[:i:i]
		}
	}
	return args
}
