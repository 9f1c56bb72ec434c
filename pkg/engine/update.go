package engine

import (
	"context"
	"errors"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Mutate edits cm, a fresh copy of the live ConfigMap (or an empty one when
// it does not exist and the engine may create it). It must derive every
// change from cm itself: on a conflict it runs again on a newer copy.
// Returning false means there is nothing to write.
type Mutate func(cm *corev1.ConfigMap) (changed bool, err error)

// Result reports a write.
type Result struct {
	Changed bool
	Created bool
	// Skipped is true when the leader guard stopped the write; SkipReason
	// says why.
	Skipped    bool
	SkipReason string
	DryRun     DryRun
	Old        *corev1.ConfigMap // the copy the write replaced (nil when created)
	New        *corev1.ConfigMap // what was written (or would have been)
	Attempts   int
	Conflicts  int
	// Queued is true when the write waited for its turn in the queue.
	Queued bool
	// QueueError is why the queue could not be used, when it could not.
	QueueError error
	// Backup is where the replaced document was backed up, if it was.
	Backup string
	// Recovered is true when the answer to the write was lost and the
	// engine found out that it had landed.
	Recovered bool
}

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

// beforeWrite runs with the exact copy a write is about to replace.
type beforeWrite func(ctx context.Context, current *corev1.ConfigMap) error

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

// Update reads the ConfigMap, lets mutate edit a copy, and writes it back
// with the resourceVersion it read. On a conflict it reads again and runs
// mutate on the newer copy; throttling, server errors and broken connections
// are retried too, until Options.Timeout. Forbidden, not found and invalid
// are returned at once. With a Leader, a process that does not hold the
// Lease writes nothing and reports Skipped.
//
// A write whose answer is lost is applied at most once: see resolve.
func (e *Engine) Update(ctx context.Context, mutate Mutate) (*Result, error) {
	return e.update(ctx, mutate, nil)
}

func (e *Engine) update(ctx context.Context, mutate Mutate, before beforeWrite) (*Result, error) {
	c := &call{e: e, res: &Result{DryRun: e.opts.DryRun}, token: newToken()}
	ctx, cancel := context.WithTimeout(c.trace(ctx), e.opts.Timeout)
	defer cancel()
	if reason, err := e.checkLeader(ctx); err != nil || reason != "" {
		c.res.Skipped, c.res.SkipReason = reason != "", reason
		return c.res, err
	}
	// While the first read is under way, ask whether writers are queued; if
	// they are, the first attempt writes nothing and queues behind them.
	var busy <-chan bool
	if q := e.coordinator; q != nil {
		ch := make(chan bool, 1)
		go func() { ch <- q.Busy(ctx) }()
		busy = ch
	}
	err := c.retry(ctx, func(ctx context.Context) (bool, error) {
		gate := busy
		busy = nil // only the first attempt gives way
		return c.attempt(ctx, mutate, before, gate)
	})
	return c.res, err
}

// Delete removes the ConfigMap once check accepts the freshly read copy,
// with the resourceVersion and uid it read as preconditions: a concurrent
// change makes the delete conflict, and check runs again on the newer copy.
// A delete whose answer is lost is recognised as done when the first change
// after the copy it checked is the deletion.
func (e *Engine) Delete(ctx context.Context, check func(cm *corev1.ConfigMap) error) (*Result, error) {
	c := &call{e: e, res: &Result{DryRun: e.opts.DryRun}}
	ctx, cancel := context.WithTimeout(c.trace(ctx), e.opts.Timeout)
	defer cancel()
	err := c.retry(ctx, func(ctx context.Context) (bool, error) {
		cms := e.client.CoreV1().ConfigMaps(e.target.Namespace)
		current, err := cms.Get(ctx, e.target.Name, metav1.GetOptions{})
		err = c.answered(err)
		if c.pending != nil {
			done, rerr := c.resolveDelete(ctx, current, err)
			if rerr != nil {
				return !IsRetryable(rerr) && ctx.Err() == nil, rerr
			}
			if done {
				c.res.Changed = true // the lost delete landed
				return true, nil
			}
		}
		if err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "get", e.target.String())
		}
		c.res.Old = current
		if err := check(current); err != nil {
			return true, err
		}
		c.res.Changed = true
		if e.opts.DryRun == DryRunClient {
			return true, nil
		}
		err = c.answered(cms.Delete(ctx, e.target.Name, metav1.DeleteOptions{
			DryRun:        e.serverDryRun(),
			Preconditions: &metav1.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion},
		}))
		if err != nil {
			if e.lost(err) {
				c.pending = &pending{kind: pendingDelete, uid: current.UID, precondition: current.ResourceVersion, cause: err}
			}
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "delete", e.target.String())
		}
		return true, nil
	})
	return c.res, err
}

func (e *Engine) serverDryRun() []string {
	if e.opts.DryRun == DryRunServer {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// lost reports whether a failed write may nonetheless have landed: the
// request went out and no answer came back. A dry run never lands.
func (e *Engine) lost(err error) bool {
	if e.opts.DryRun != DryRunNone || apierrors.IsConflict(err) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		// The server answered; only a timeout while it was still working
		// leaves the outcome open.
		return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || status.Status().Code >= 500
	}
	return true // no answer at all: the connection broke, or the deadline passed
}

// retry runs attempt until it is done, waiting between attempts: the server's
// Retry-After when it gives one, otherwise jittered exponential backoff, and
// on a conflict the Coordinator's turn when there is one. It gives up when
// ctx's deadline passes.
func (c *call) retry(ctx context.Context, attempt func(context.Context) (bool, error)) error {
	delays := backoff
	coordinator := c.e.coordinator
	var lastErr error
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	for {
		c.res.Attempts++
		done, err := attempt(ctx)
		if done {
			return err
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

// attempt makes one read-mutate-write pass. done is false when the error is
// worth another attempt.
func (c *call) attempt(ctx context.Context, mutate Mutate, before beforeWrite, busy <-chan bool) (done bool, err error) {
	e, res := c.e, c.res
	prevOld := res.Old
	res.Changed, res.Created, res.Old, res.New = false, false, nil, nil // nothing carries over from a failed attempt
	cms := e.client.CoreV1().ConfigMaps(e.target.Namespace)
	current, err := cms.Get(ctx, e.target.Name, metav1.GetOptions{})
	err = c.answered(err)
	missing := apierrors.IsNotFound(err) && e.opts.CreateIfMissing
	if err != nil && !missing {
		if c.pending != nil && apierrors.IsNotFound(err) {
			// Gone since our lost write: only the history can tell.
			current = nil
		} else {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "get", e.target.String())
		}
	}
	var createRV string // with missing: the collection's resourceVersion, for a lost create
	if missing {
		if createRV, err = c.collectionVersion(ctx); err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "list", e.target.String())
		}
		current = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: e.target.Name, Namespace: e.target.Namespace}}
	}
	if c.pending != nil {
		if missing {
			current = nil
		}
		landed, err := c.resolve(ctx, current)
		switch {
		case err != nil:
			return !IsRetryable(err) && ctx.Err() == nil, err
		case landed != nil:
			res.Changed, res.Old, res.New, res.Recovered = true, prevOld, landed, true
			res.Created = prevOld == nil
			return true, nil
		}
		if missing {
			current = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: e.target.Name, Namespace: e.target.Namespace}}
		}
	}
	work := current.DeepCopy()
	changed, err := mutate(work)
	if err != nil || !changed {
		res.Old, res.New = current, current
		if c.pending != nil {
			// The lost write may still land (the object is at its
			// precondition) and there is nothing to send again: only an edit
			// that does not give the same result twice gets here.
			return true, c.unknown(c.pending.cause)
		}
		return true, err
	}
	if work.Annotations == nil {
		work.Annotations = map[string]string{}
	}
	work.Annotations[WriteIDAnnotation] = c.token
	res.Changed, res.Created = true, missing
	if !missing {
		res.Old = current
	}
	res.New = work
	if e.opts.DryRun == DryRunClient {
		return true, nil
	}
	if busy != nil {
		select {
		case queued := <-busy:
			if queued {
				return false, errQueueBusy
			}
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if before != nil && !missing && e.opts.DryRun == DryRunNone {
		if err := before(ctx, current); err != nil {
			return true, err
		}
	}
	var written *corev1.ConfigMap
	if missing {
		written, err = cms.Create(ctx, work, metav1.CreateOptions{DryRun: e.serverDryRun(), FieldManager: e.opts.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			// Someone created it first: treat as a conflict and start over.
			err = apierrors.NewConflict(corev1.Resource("configmaps"), e.target.Name, err)
		}
	} else {
		// work carries current's resourceVersion: the compare-and-swap.
		written, err = cms.Update(ctx, work, metav1.UpdateOptions{DryRun: e.serverDryRun(), FieldManager: e.opts.FieldManager})
	}
	if c.answered(err) != nil {
		if e.lost(err) {
			p := &pending{kind: pendingUpdate, uid: current.UID, precondition: current.ResourceVersion, cause: err}
			if missing {
				p.kind, p.precondition = pendingCreate, createRV
			}
			c.pending = p
		}
		return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "update", e.target.String())
	}
	c.pending = nil
	res.New = written
	return true, nil
}

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
