package engine

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
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
}

// ErrGaveUp marks a write that ran out of its time budget.
var ErrGaveUp = errors.New("gave up")

// errQueueBusy makes a first attempt give way to writers already queued. It
// is not a conflict: nothing was sent, and Result.Conflicts stays honest.
var errQueueBusy = errors.New("writers are queued")

// backoff is the jittered exponential delay between attempts.
var backoff = wait.Backoff{Duration: 5 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 8, Cap: 200 * time.Millisecond}

// beforeWrite runs with the exact copy a write is about to replace.
type beforeWrite func(ctx context.Context, current *corev1.ConfigMap) error

// Update reads the ConfigMap, lets mutate edit a copy, and writes it back
// with the resourceVersion it read. On a conflict it reads again and runs
// mutate on the newer copy; throttling, server errors and broken connections
// are retried too, until Options.Timeout. Forbidden, not found and invalid
// are returned at once. With a Leader, a process that does not hold the
// Lease writes nothing and reports Skipped.
func (e *Engine) Update(ctx context.Context, mutate Mutate) (*Result, error) {
	return e.update(ctx, mutate, nil)
}

func (e *Engine) update(ctx context.Context, mutate Mutate, before beforeWrite) (*Result, error) {
	res := &Result{DryRun: e.opts.DryRun}
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	if reason, err := e.checkLeader(ctx); err != nil || reason != "" {
		res.Skipped, res.SkipReason = reason != "", reason
		return res, err
	}
	// While the first read is under way, ask whether writers are queued; if
	// they are, the first attempt writes nothing and queues behind them.
	var busy <-chan bool
	if c := e.coordinator; c != nil {
		ch := make(chan bool, 1)
		go func() { ch <- c.Busy(ctx) }()
		busy = ch
	}
	var unknown *corev1.ConfigMap // a write whose outcome was lost with its connection
	err := e.retry(ctx, res, func(ctx context.Context) (bool, error) {
		gate := busy
		busy = nil // only the first attempt gives way
		return e.attempt(ctx, mutate, before, res, gate, &unknown)
	})
	return res, err
}

// Delete removes the ConfigMap once check accepts the freshly read copy,
// with the resourceVersion and uid it read as preconditions: a concurrent
// change makes the delete conflict, and check runs again on the newer copy.
func (e *Engine) Delete(ctx context.Context, check func(cm *corev1.ConfigMap) error) (*Result, error) {
	res := &Result{DryRun: e.opts.DryRun}
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	err := e.retry(ctx, res, func(ctx context.Context) (bool, error) {
		cms := e.client.CoreV1().ConfigMaps(e.target.Namespace)
		current, err := cms.Get(ctx, e.target.Name, metav1.GetOptions{})
		if err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "get", e.target.String())
		}
		res.Old = current
		if err := check(current); err != nil {
			return true, err
		}
		res.Changed = true
		if e.opts.DryRun == DryRunClient {
			return true, nil
		}
		err = cms.Delete(ctx, e.target.Name, metav1.DeleteOptions{
			DryRun:        e.serverDryRun(),
			Preconditions: &metav1.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion},
		})
		if err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "delete", e.target.String())
		}
		return true, nil
	})
	return res, err
}

func (e *Engine) serverDryRun() []string {
	if e.opts.DryRun == DryRunServer {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// retry runs attempt until it is done, waiting between attempts: the server's
// Retry-After when it gives one, otherwise jittered exponential backoff, and
// on a conflict the Coordinator's turn when there is one. It gives up when
// ctx's deadline passes.
func (e *Engine) retry(ctx context.Context, res *Result, attempt func(context.Context) (bool, error)) error {
	delays := backoff
	coordinator := e.coordinator
	var lastErr error
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	for {
		res.Attempts++
		done, err := attempt(ctx)
		if done {
			return err
		}
		lastErr = err
		conflict := apierrors.IsConflict(err)
		if conflict {
			res.Conflicts++
		}
		if (conflict || errors.Is(err, errQueueBusy)) && coordinator != nil && release == nil {
			// Take a turn instead of colliding again, and keep it until done.
			var qerr error
			if release, qerr = coordinator.Acquire(ctx); qerr == nil {
				res.Queued = true
				continue
			}
			if ctx.Err() != nil {
				return e.stopped(ctx, res, lastErr)
			}
			// The queue is unusable (no rights on Leases, say): fall back to
			// backoff alone, which is slower but still safe.
			res.QueueError = qerr
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
			return e.stopped(ctx, res, lastErr)
		case <-time.After(wait):
		}
	}
}

func wait2ms() time.Duration { return wait.Jitter(2*time.Millisecond, 1) }

// attempt makes one read-mutate-write pass. done is false when the error is
// worth another attempt.
func (e *Engine) attempt(ctx context.Context, mutate Mutate, before beforeWrite, res *Result, busy <-chan bool, unknown **corev1.ConfigMap) (done bool, err error) {
	prevOld := res.Old
	res.Changed, res.Created, res.Old, res.New = false, false, nil, nil // nothing carries over from a failed attempt
	cms := e.client.CoreV1().ConfigMaps(e.target.Namespace)
	current, err := cms.Get(ctx, e.target.Name, metav1.GetOptions{})
	missing := apierrors.IsNotFound(err) && e.opts.CreateIfMissing
	switch {
	case missing:
		current = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: e.target.Name, Namespace: e.target.Namespace}}
	case err != nil:
		return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "get", e.target.String())
	}
	if sent := *unknown; sent != nil && !missing && sameContent(sent, current) {
		// The write whose answer was lost did land: do not apply the edit a
		// second time (an append would append twice).
		res.Changed, res.Old, res.New = true, prevOld, current
		return true, nil
	}
	*unknown = nil
	work := current.DeepCopy()
	changed, err := mutate(work)
	if err != nil || !changed {
		res.Old, res.New = current, current
		return true, err
	}
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
	if err != nil {
		if !apierrors.IsConflict(err) && IsRetryable(err) {
			*unknown = work // it may have landed; the next read tells
		}
		return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "update", e.target.String())
	}
	res.New = written
	return true, nil
}

// sameContent reports whether cm holds what sent was to write.
func sameContent(sent, cm *corev1.ConfigMap) bool {
	return equality.Semantic.DeepEqual(sent.Data, cm.Data) && equality.Semantic.DeepEqual(sent.BinaryData, cm.BinaryData) &&
		equality.Semantic.DeepEqual(sent.Annotations, cm.Annotations) && equality.Semantic.DeepEqual(sent.Labels, cm.Labels)
}

// stopped explains a write whose context ended: interrupted (exit 1), or out
// of time, which is exit 1 when the API server could not be reached at all
// and exit 4 (retries exhausted) otherwise.
func (e *Engine) stopped(ctx context.Context, res *Result, last error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return exitcode.Failuref("interrupted after %d attempts on %s", res.Attempts, e.target)
	}
	timeout := e.opts.Timeout
	if last != nil && (utilnet.IsConnectionRefused(last) || utilnet.IsConnectionReset(last) || utilnet.IsProbableEOF(last)) {
		return exitcode.Failuref("%w on %s after %d attempts in %s: %w", ErrGaveUp, e.target, res.Attempts, timeout, last)
	}
	if res.Conflicts > 0 {
		return exitcode.Conflictf("%w on %s after %d attempts in %s (%d conflicts with other writers); nothing was written by this command",
			ErrGaveUp, e.target, res.Attempts, timeout, res.Conflicts)
	}
	why := "no answer"
	if last != nil {
		why = exitcode.Message(last)
	}
	return exitcode.Conflictf("%w on %s after %d attempts in %s (%s)", ErrGaveUp, e.target, res.Attempts, timeout, why)
}
