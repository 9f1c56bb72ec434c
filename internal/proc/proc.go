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
	"slices"
	"strings"
	"sync"
	"syscall"
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
	// Environ is the environment Env is added to; nil is this program's.
	Environ []string
	// Env is added to the environment (KEY=VALUE); a key given twice takes
	// its last value.
	Env []string
	// Stdin is the child's standard input; nil is the null device.
	Stdin io.Reader
	// Stdout and Stderr receive the output as it comes, besides the tail;
	// nil keeps it in the tail only.
	Stdout, Stderr io.Writer
	// NoTail gives Stdout and Stderr to the child as they are, keeping no
	// tail: a terminal's files then reach the child itself, which an
	// editor needs to draw on it. RunError quotes no output then.
	NoTail bool
	// MaxStdout stops the child once its standard output passes this many
	// bytes (RunError.TooLarge); 0 is no bound. What Stdout receives is
	// not cut.
	MaxStdout int
	// Timeout stops the child after it (RunError.TimedOut); 0 leaves it to
	// the context.
	Timeout time.Duration
	// Grace, when set, makes a stop (Timeout, the context's end) a request
	// first: the process group gets SIGTERM, and SIGKILL only once Grace
	// has passed with the child still there, so that a child can end what
	// it started outside its group (a systemd unit) before it exits. 0
	// kills at once. It also waits Grace longer for a grandchild that
	// holds the output open.
	Grace time.Duration
	// Foreground, when set, is the controlling terminal whose foreground
	// the child's process group takes while it runs (Unix), so that it can
	// read it and the terminal's signals (Ctrl-C) reach it directly, not
	// through this program. This program ignores SIGTTOU meanwhile, and its
	// own process group takes the foreground back once the child has
	// exited; so hand the terminal to one child at a time.
	// ForegroundTerminal tells whether a reader is such a terminal.
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
	tail     *Tail // both outputs; nil with NoTail
	errTail  *Tail // the standard error alone: the flood a TooLarge child printed is not quoted
	stdout   *capped
	ctx      context.Context
	release  context.CancelFunc
	done     chan struct{}
	err      error // of the wait, once done is closed

	mu      sync.Mutex
	stopped error // why it was stopped (the context's cause), nil if it was not

	once   sync.Once
	result error // Wait's
}

// Why a Process's context ends, besides its parent's end.
var (
	errTimedOut  = errors.New("proc: the timeout passed")
	errTooLarge  = errors.New("proc: the output bound was passed")
	errStartLost = errors.New("proc: the start panicked")
)

// Start starts c. The child is stopped (its whole process group killed,
// after SIGTERM and c.Grace when Grace is set) when ctx ends or c.Timeout
// passes. On Linux it gets the parent-death
// signal: the goroutine that started it keeps its thread until it exits,
// since the kernel sends the signal when that thread ends. A child that
// cannot start is a *RunError with NotStarted.
func (c *Cmd) Start(ctx context.Context) (*Process, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("proc: no command")
	}
	p := &Process{cmd: c, done: make(chan struct{})}
	ctx, stop := context.WithCancelCause(ctx)
	p.ctx, p.release = ctx, func() { stop(nil) }
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		p.ctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, errTimedOut)
		p.release = func() { cancel(); stop(nil) }
	}
	cmd := exec.CommandContext(p.ctx, c.Args[0], c.Args[1:]...)
	if c.Environ != nil || len(c.Env) > 0 {
		env := c.Environ
		if env == nil {
			env = os.Environ()
		}
		cmd.Env = append(slices.Clip(env), c.Env...)
	}
	cmd.Stdin = c.Stdin
	stdout, stderr := c.Stdout, c.Stderr
	if !c.NoTail {
		p.tail, p.errTail = &Tail{}, &Tail{}
		stdout, stderr = tee(stdout, p.tail), tee(stderr, io.MultiWriter(p.tail, p.errTail))
	}
	if c.MaxStdout > 0 {
		p.stdout = &capped{max: c.MaxStdout, full: func() { stop(errTooLarge) }}
		stdout = tee(stdout, p.stdout)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A grandchild that keeps the output open cannot hold the caller;
	// past Grace, exec kills the child itself.
	cmd.WaitDelay = 5*time.Second + max(c.Grace, 0)
	supervise(cmd, c.Foreground)
	kill := cmd.Cancel
	cmd.Cancel = func() error {
		p.mu.Lock()
		p.stopped = context.Cause(p.ctx)
		p.mu.Unlock()
		if c.Grace <= 0 {
			return kill()
		}
		time.AfterFunc(c.Grace, func() {
			select {
			case <-p.done: // ended: the group's id may name another group by now
			default:
				_ = kill()
			}
		})
		return signalGroup(cmd.Process, syscall.SIGTERM)
	}
	p.ecmd = cmd

	started := make(chan error, 1)
	waited := crash.Go(func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		sent := false
		defer func() {
			if !sent {
				started <- errStartLost
			}
		}()
		err := cmd.Start()
		if err == nil {
			// Named before anything can reap it: its pid is its own
			// until then.
			p.identity = Describe(cmd.Process.Pid)
			if c.Foreground != nil {
				handedOver()
				defer takeBack(c.Foreground, cmd.Process.Pid)
			}
		}
		sent = true
		started <- err
		if err != nil {
			return nil
		}
		return cmd.Wait()
	})
	if err := <-started; err != nil {
		p.release()
		if panicked := <-waited; errors.Is(err, errStartLost) && panicked != nil {
			err = panicked // a bug: its panic says where
		}
		return nil, &RunError{Command: c.Args, ExitCode: -1, Err: err, NotStarted: true}
	}
	crash.Go(func() error {
		p.err = <-waited
		p.release()
		close(p.done)
		return nil
	})
	return p, nil
}

func tee(w, also io.Writer) io.Writer {
	if w == nil {
		return also
	}
	return io.MultiWriter(w, also)
}

// Identity names the started child for a later look at whether it runs.
// It is read before anything can reap the child.
func (p *Process) Identity() Identity { return p.identity }

// PID is the child's process id, also its process group's.
func (p *Process) PID() int { return p.ecmd.Process.Pid }

// Done is closed once the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the child's whole process group (Windows: ends the
// child). Once Done, it sends nothing (os.ErrProcessDone): the group's id
// may name another group by then.
func (p *Process) Signal(sig os.Signal) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	return signalGroup(p.ecmd.Process, sig)
}

// Tail is the end of what the child printed, as RunError quotes it; ""
// with NoTail.
func (p *Process) Tail() string {
	if p.tail == nil {
		return ""
	}
	return p.tail.Last(p.tailLines(), p.tailBytes())
}

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
// printed no more than MaxStdout), a *RunError otherwise. It may be called
// more than once.
func (p *Process) Wait() error {
	<-p.done
	p.once.Do(func() { p.result = p.runError() })
	return p.result
}

func (p *Process) runError() error {
	tooLarge := p.stdout != nil && p.stdout.overflowed()
	if p.err == nil && !tooLarge {
		return nil
	}
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	e := &RunError{Command: p.cmd.Args, ExitCode: -1, Err: p.err, Tail: p.Tail(), Timeout: p.cmd.Timeout, MaxStdout: p.cmd.MaxStdout}
	switch {
	case tooLarge:
		e.TooLarge, e.Tail = true, ""
		if p.errTail != nil {
			e.Tail = p.errTail.Last(p.tailLines(), p.tailBytes())
		}
	case errors.Is(stopped, errTimedOut):
		e.TimedOut = true
	case stopped != nil:
		e.Interrupted = true
	case p.ecmd.ProcessState != nil: // it ended by itself
		if sig, ok := exitSignal(p.ecmd.ProcessState); ok {
			e.Signal = sig
		} else if p.ecmd.ProcessState.Exited() {
			e.ExitCode = p.ecmd.ProcessState.ExitCode()
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

func (p *Process) tailLines() int { return orDefault(p.cmd.TailLines, DefaultTailLines) }
func (p *Process) tailBytes() int { return orDefault(p.cmd.TailBytes, DefaultTailBytes) }

func orDefault(v, def int) int {
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

// ErrNotFound is what the RunError of a command that is not in PATH wraps
// (errors.Is).
var ErrNotFound = exec.ErrNotFound

// LookPath finds the file Cmd runs for name. A caller that runs one
// command several times looks it up once, so that every run is of the same
// file.
func LookPath(name string) (string, error) { return exec.LookPath(name) }

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
	case e.ExitCode == 0 && e.Err != nil: // what it started held its output open
		return fmt.Sprintf("exited 0 but failed: %v", e.Err)
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
