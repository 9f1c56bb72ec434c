package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The state of one engine call, how it retries, and how it explains giving
// up.

// ErrGaveUp marks a write that ran out of its time budget with nothing of
// it written.
var ErrGaveUp = errors.New("gave up")

// ErrOutcomeUnknown marks a write whose answer was lost and whose outcome
// could not be found out (exit code 7): it may or may not have landed.
var ErrOutcomeUnknown = errors.New("the outcome of the last write is unknown")

// errQueueBusy makes a first attempt give way to writers already queued. It
// is not a conflict: nothing was sent, and Result.Conflicts stays honest.
var errQueueBusy = errors.New("writers are queued")

// backoff is the jittered exponential delay between attempts.
var backoff = wait.Backoff{Duration: 5 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 8, Cap: 200 * time.Millisecond}

// call is the state of one Update or Delete: what it has sent, and what it
// knows about the server.
type call struct {
	e   *Engine
	res *Result
	// token marks every write of this call (WriteIDAnnotation), so a write
	// whose answer was lost can be recognised as this call's and no other's.
	token string
	// pending is a write whose answer was lost; nil when none is.
	pending *pending
	// sent is the last write sent, nil before the first: what a write of
	// this call that is found to have landed replaced.
	sent *sentWrite
	// connected is set once any request got a connection to the API server:
	// giving up without one means the server could not be reached.
	connected atomic.Bool
	// reading is true for a call that only reads.
	reading bool
}

// answered marks the call connected when err is an answer from the API
// server (nil, or a Status), and returns err.
func (c *call) answered(err error) error {
	var status apierrors.APIStatus
	if err == nil || errors.As(err, &status) {
		c.connected.Store(true)
	}
	return err
}

// trace marks the call connected when a request gets a connection.
func (c *call) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { c.connected.Store(true) },
	})
}

// retry runs attempt until it is done, waiting between attempts: the server's
// Retry-After when it gives one, otherwise jittered exponential backoff, and
// on a conflict the Coordinator's turn when there is one. It gives up when
// ctx's deadline passes.
func (c *call) retry(ctx context.Context, attempt func(context.Context) (bool, error)) (err error) {
	delays := backoff
	coordinator := c.e.coordinator
	var lastErr error
	var release func() error
	defer func() {
		if release == nil {
			return
		}
		if rerr := release(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	for {
		c.res.Attempts++
		done, err := attempt(ctx)
		if done {
			return c.final(err)
		}
		lastErr = err
		conflict := apierrors.IsConflict(err)
		if conflict {
			c.res.Conflicts++
		}
		if (conflict || errors.Is(err, errQueueBusy)) && coordinator != nil && release == nil {
			// Take a turn instead of colliding again, and keep it until done.
			var qerr error
			if release, qerr = coordinator.Acquire(ctx); qerr == nil {
				c.res.Queued = true
				continue
			}
			if ctx.Err() != nil {
				return c.stopped(ctx, lastErr)
			}
			// The queue is unusable (no rights on Leases, say): fall back to
			// backoff alone, which is slower but still safe.
			c.res.QueueError = qerr
			coordinator = nil
		}
		var wait time.Duration
		switch seconds, ok := apierrors.SuggestsClientDelay(err); {
		case ok:
			wait = time.Duration(seconds) * time.Second
		case conflict && release != nil:
			// Our turn, but a writer outside the queue got in first.
			wait = wait2ms()
		default:
			wait = delays.Step() // jittered, growing to the cap
		}
		select {
		case <-ctx.Done():
			return c.stopped(ctx, lastErr)
		case <-time.After(wait):
		}
	}
}

func wait2ms() time.Duration { return wait.Jitter(2*time.Millisecond, 1) }

// stopped explains a call whose context ended. A write whose answer was lost
// and not yet resolved makes the outcome unknown (exit 7), whatever ended the
// call. Otherwise: interrupted (exit 1); the API server never reached (exit
// 1); out of time against conflicts or a busy or hanging server (exit 4).
func (c *call) stopped(ctx context.Context, last error) error {
	e, res := c.e, c.res
	if c.pending != nil {
		return c.unknown(c.pending.cause)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return exitcode.Failuref("interrupted after %d attempts on %s", res.Attempts, e.target)
	}
	timeout := e.opts.Timeout
	if !c.connected.Load() {
		return exitcode.Failuref("%w on %s: no connection in %s, %d attempts: %w", ErrUnreachable, e.target, timeout, res.Attempts, last)
	}
	if c.reading {
		return exitcode.Conflictf("%w reading %s after %d attempts in %s (%s)", ErrGaveUp, e.target, res.Attempts, timeout, message(last))
	}
	if res.Conflicts > 0 {
		return exitcode.Conflictf("%w on %s after %d attempts in %s (%d conflicts with other writers); nothing was written by this command",
			ErrGaveUp, e.target, res.Attempts, timeout, res.Conflicts)
	}
	return exitcode.Conflictf("%w on %s after %d attempts in %s (%s); nothing was written by this command", ErrGaveUp, e.target, res.Attempts, timeout, message(last))
}

// message says why the last attempt failed.
func message(last error) string {
	if last == nil {
		return "no answer"
	}
	return exitcode.Message(last)
}

// final is the error a call ends with. While a write whose answer was lost
// may still land, every failure is an unknown outcome (exit 7): a refused
// watch or re-read, a failed backup, a check that no longer passes say
// nothing about that write, and a code that means "nothing was written"
// would make a script apply the edit twice.
func (c *call) final(err error) error {
	if err == nil || c.pending == nil || errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	if b := (*BackupError)(nil); errors.As(err, &b) {
		// Its "nothing was written" is about the copy not sent again.
		err = fmt.Errorf("the backup before sending it again failed: %w", b.Err)
	}
	return c.unknown(errors.Join(c.pending.cause, err))
}

// sentWrite is a write the call sent.
type sentWrite struct {
	// replaced is the copy the write replaced; nil for a create.
	replaced *corev1.ConfigMap
}

// unknown is the error of a call that cannot tell whether its write landed.
func (c *call) unknown(cause error) error {
	return exitcode.New(exitcode.OutcomeUnknown, &OutcomeError{Target: c.e.target.String(), WriteID: c.token, Cause: cause})
}

// OutcomeError is a write whose answer was lost and whose outcome could not
// be found out.
type OutcomeError struct {
	Target string
	// WriteID is the write's WriteIDAnnotation: the write landed if a copy
	// of the ConfigMap ever carried it.
	WriteID string
	Cause   error
}

func (e *OutcomeError) Error() string {
	msg := ErrOutcomeUnknown.Error() + ": the answer to the write of " + e.Target
	if e.WriteID != "" {
		msg += " (write id " + e.WriteID + ")"
	}
	msg += " was lost"
	if e.Cause != nil {
		msg += " (" + exitcode.Message(e.Cause) + ")"
	}
	return msg + " and whether it landed cannot be told"
}

func (e *OutcomeError) Unwrap() error { return ErrOutcomeUnknown }
