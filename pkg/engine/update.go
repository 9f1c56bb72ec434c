package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// DryRun is kubectl's --dry-run: none writes, client stops before the write,
// server sends the write with dryRun=All so admission sees it.
type DryRun string

// The --dry-run values.
const (
	DryRunNone   DryRun = "none"
	DryRunClient DryRun = "client"
	DryRunServer DryRun = "server"
)

// Mutate edits cm, a fresh copy of the live ConfigMap (or an empty one when
// it does not exist and the engine may create it). It must derive every
// change from cm itself: on a conflict it runs again on a newer copy.
// Returning false means there is nothing to write.
type Mutate func(cm *corev1.ConfigMap) (changed bool, err error)

// Options tune a write.
type Options struct {
	// Timeout bounds the whole write, retries included.
	Timeout time.Duration
	DryRun  DryRun
	// FieldManager is recorded in managedFields.
	FieldManager string
	// CreateIfMissing lets Mutate start from an empty ConfigMap and creates it.
	CreateIfMissing bool
	// BeforeWrite runs with the exact copy an Update is about to replace (the
	// one whose resourceVersion it carries); an error aborts the write. The
	// backup hook.
	BeforeWrite func(ctx context.Context, current *corev1.ConfigMap) error
	// Coordinator orders writers that keep conflicting; nil retries with
	// jittered backoff alone.
	Coordinator Coordinator
}

// Coordinator is how writers that contend take turns. Acquire blocks until
// the writer may try; the returned release must be called when it is done.
// Busy reports whether writers are already waiting: a newcomer then joins
// them instead of cutting in with an optimistic write.
type Coordinator interface {
	Acquire(ctx context.Context) (release func(), err error)
	Busy(ctx context.Context) bool
}

// errQueueBusy makes a first attempt give way to writers already queued. It
// is not a conflict: nothing was sent, and Result.Conflicts stays honest.
var errQueueBusy = errors.New("writers are queued")

// dryRun is Options.DryRun, where the zero value means none: an engine
// built without options writes, and takes part in the queue.
func (e *Engine) dryRun() DryRun {
	if e.Options.DryRun == "" {
		return DryRunNone
	}
	return e.Options.DryRun
}

// Result reports a write.
type Result struct {
	Changed   bool
	Created   bool
	DryRun    DryRun
	Old       *corev1.ConfigMap // the copy the write replaced (nil when created)
	New       *corev1.ConfigMap // what was written (or would have been)
	Attempts  int
	Conflicts int
	// Queued is true when the write waited for its turn in the queue.
	Queued bool
	// QueueError is why the queue could not be used, when it could not.
	QueueError error
}

// Engine writes one ConfigMap with compare-and-swap.
type Engine struct {
	Client  corev1client.ConfigMapsGetter
	Target  Target
	Options Options
}

// backoff is the jittered exponential delay between attempts.
var backoff = wait.Backoff{Duration: 5 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 8, Cap: 200 * time.Millisecond}

// Update reads the ConfigMap, lets mutate edit a copy, and writes it back
// with the resourceVersion it read. On a conflict it reads again and runs
// mutate on the newer copy; throttling, server errors and broken connections
// are retried too, until Options.Timeout. Forbidden, not found and invalid
// are returned at once.
func (e *Engine) Update(ctx context.Context, mutate Mutate) (*Result, error) {
	res := &Result{DryRun: e.dryRun()}
	// While the first read is under way, ask whether writers are queued; if
	// they are, the first attempt writes nothing and queues behind them.
	var busy <-chan bool
	if c := e.Options.Coordinator; c != nil && e.dryRun() == DryRunNone {
		ch := make(chan bool, 1)
		go func() { ch <- c.Busy(ctx) }()
		busy = ch
	}
	var unknown *corev1.ConfigMap // a write whose outcome was lost with its connection
	err := e.retry(ctx, res, func(ctx context.Context) (bool, error) {
		gate := busy
		busy = nil // only the first attempt gives way
		return e.attempt(ctx, mutate, res, gate, &unknown)
	})
	return res, err
}

// Delete removes the ConfigMap once check accepts the freshly read copy,
// with the resourceVersion and uid it read as preconditions: a concurrent
// change makes the delete conflict, and check runs again on the newer copy.
func (e *Engine) Delete(ctx context.Context, check func(cm *corev1.ConfigMap) error) (*Result, error) {
	res := &Result{DryRun: e.dryRun()}
	err := e.retry(ctx, res, func(ctx context.Context) (bool, error) {
		cms := e.Client.ConfigMaps(e.Target.Namespace)
		current, err := cms.Get(ctx, e.Target.Name, metav1.GetOptions{})
		if err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "get", e.Target.String())
		}
		res.Old = current
		if err := check(current); err != nil {
			return true, err
		}
		res.Changed = true
		if e.dryRun() == DryRunClient {
			return true, nil
		}
		var dryRun []string
		if e.dryRun() == DryRunServer {
			dryRun = []string{metav1.DryRunAll}
		}
		err = cms.Delete(ctx, e.Target.Name, metav1.DeleteOptions{
			DryRun:        dryRun,
			Preconditions: &metav1.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion},
		})
		if err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "delete", e.Target.String())
		}
		return true, nil
	})
	return res, err
}

// retry runs attempt until it is done, waiting between attempts: the server's
// Retry-After when it gives one, otherwise jittered exponential backoff, and
// on a conflict the Coordinator's turn when there is one. It gives up when
// Options.Timeout runs out.
func (e *Engine) retry(ctx context.Context, res *Result, attempt func(context.Context) (bool, error)) error {
	timeout := e.Options.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	delays := backoff
	coordinator := e.Options.Coordinator
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
			if errors.Is(ctx.Err(), context.Canceled) {
				return exitcode.Failuref("interrupted after %d attempts on %s", res.Attempts, e.Target)
			}
			if ctx.Err() != nil {
				return e.gaveUp(res, timeout, lastErr)
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
			if errors.Is(ctx.Err(), context.Canceled) {
				return exitcode.Failuref("interrupted after %d attempts on %s", res.Attempts, e.Target)
			}
			return e.gaveUp(res, timeout, lastErr)
		case <-time.After(wait):
		}
	}
}

func wait2ms() time.Duration { return wait.Jitter(2*time.Millisecond, 1) }

// attempt makes one read-mutate-write pass. done is false when the error is
// worth another attempt.
func (e *Engine) attempt(ctx context.Context, mutate Mutate, res *Result, busy <-chan bool, unknown **corev1.ConfigMap) (done bool, err error) {
	prevOld := res.Old
	res.Changed, res.Created, res.Old, res.New = false, false, nil, nil // nothing carries over from a failed attempt
	cms := e.Client.ConfigMaps(e.Target.Namespace)
	current, err := cms.Get(ctx, e.Target.Name, metav1.GetOptions{})
	missing := apierrors.IsNotFound(err) && e.Options.CreateIfMissing
	switch {
	case missing:
		current = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: e.Target.Name, Namespace: e.Target.Namespace}}
	case err != nil:
		return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "get", e.Target.String())
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
	if e.dryRun() == DryRunClient {
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
	if e.Options.BeforeWrite != nil && !missing && e.dryRun() != DryRunServer {
		if err := e.Options.BeforeWrite(ctx, current); err != nil {
			return true, err
		}
	}
	var dryRun []string
	if e.dryRun() == DryRunServer {
		dryRun = []string{metav1.DryRunAll}
	}
	var written *corev1.ConfigMap
	if missing {
		written, err = cms.Create(ctx, work, metav1.CreateOptions{DryRun: dryRun, FieldManager: e.Options.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			// Someone created it first: treat as a conflict and start over.
			err = apierrors.NewConflict(corev1.Resource("configmaps"), e.Target.Name, err)
		}
	} else {
		// work carries current's resourceVersion: the compare-and-swap.
		written, err = cms.Update(ctx, work, metav1.UpdateOptions{DryRun: dryRun, FieldManager: e.Options.FieldManager})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && IsRetryable(err) {
			*unknown = work // it may have landed; the next read tells
		}
		return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "update", e.Target.String())
	}
	res.New = written
	return true, nil
}

// sameContent reports whether cm holds what sent was to write.
func sameContent(sent, cm *corev1.ConfigMap) bool {
	return equality.Semantic.DeepEqual(sent.Data, cm.Data) && equality.Semantic.DeepEqual(sent.BinaryData, cm.BinaryData) &&
		equality.Semantic.DeepEqual(sent.Annotations, cm.Annotations) && equality.Semantic.DeepEqual(sent.Labels, cm.Labels)
}

// gaveUp explains a write that ran out of time: exit 1 when the API server
// could not be reached at all, exit 4 (retries exhausted) otherwise.
func (e *Engine) gaveUp(res *Result, timeout time.Duration, last error) error {
	if last != nil && (utilnet.IsConnectionRefused(last) || utilnet.IsConnectionReset(last) || utilnet.IsProbableEOF(last)) {
		return exitcode.Failuref("gave up on %s after %d attempts in %s: %w", e.Target, res.Attempts, timeout, last)
	}
	if res.Conflicts > 0 {
		return exitcode.Conflictf("gave up on %s after %d attempts in %s (%d conflicts with other writers); nothing was written by this command, retry or raise --timeout",
			e.Target, res.Attempts, timeout, res.Conflicts)
	}
	why := "no answer"
	if last != nil {
		why = exitcode.Message(last)
	}
	return exitcode.Conflictf("gave up on %s after %d attempts in %s (%s); retry or raise --timeout", e.Target, res.Attempts, timeout, why)
}

// String renders a resourceVersion transition for messages.
func (r *Result) String() string {
	attempts := fmt.Sprintf("%d attempts", r.Attempts)
	if r.Attempts == 1 {
		attempts = "1 attempt"
	}
	switch {
	case !r.Changed:
		return "unchanged"
	case r.Created || r.Old == nil:
		return fmt.Sprintf("(resourceVersion %s, %s)", r.New.ResourceVersion, attempts)
	}
	return fmt.Sprintf("(resourceVersion %s -> %s, %s)", r.Old.ResourceVersion, r.New.ResourceVersion, attempts)
}
