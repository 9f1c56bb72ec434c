package engine

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
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
	// Recovered is true when the answer to the write was lost, or said it
	// had failed, and the engine found out that it had landed.
	Recovered bool
}

// beforeWrite runs with the exact copy a write is about to replace.
type beforeWrite func(ctx context.Context, current *corev1.ConfigMap) error

// Update reads the ConfigMap, lets mutate edit a copy, and writes it back
// with the resourceVersion it read. On a conflict it reads again and runs
// mutate on the newer copy; throttling, server errors and broken connections
// are retried too, until Options.Timeout. Forbidden, not found and invalid
// are returned at once. With a Leader, a process that does not hold the
// Lease, at the start or right before a write, writes nothing (more) and
// reports Skipped.
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
	// they are (errQueueBusy), the first attempt writes nothing and queues
	// behind them.
	var busy <-chan error
	if q := e.coordinator; q != nil {
		busy = crash.Go(func() error {
			if q.Busy(ctx) {
				return errQueueBusy
			}
			return nil
		})
	}
	gate := busy
	err := c.retry(ctx, func(ctx context.Context) (bool, error) {
		g := gate
		gate = nil // only the first attempt gives way
		return c.attempt(ctx, mutate, before, g)
	})
	if busy != nil {
		// An attempt that wrote nothing did not wait for the answer: wait
		// for it now (the call's end cancels it), so that a panic there is
		// not lost. An answer already taken leaves the channel closed.
		cancel()
		if berr := <-busy; berr != nil && !errors.Is(berr, errQueueBusy) {
			err = errors.Join(err, berr)
		}
	}
	return c.res, err
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

// attempt makes one read-mutate-write pass. done is false when the error is
// worth another attempt.
func (c *call) attempt(ctx context.Context, mutate Mutate, before beforeWrite, busy <-chan error) (done bool, err error) {
	e, res := c.e, c.res
	res.Changed, res.Created, res.Old, res.New = false, false, nil, nil // nothing carries over from a failed attempt
	cms := e.client.CoreV1().ConfigMaps(e.target.Namespace)
	current, getErr := cms.Get(ctx, e.target.Name, metav1.GetOptions{})
	getErr = c.answered(getErr)
	absent := apierrors.IsNotFound(getErr)
	if getErr != nil && !absent {
		return !IsRetryable(getErr) && ctx.Err() == nil, APIError(getErr, "get", e.target.String())
	}
	if absent {
		current = nil
	}
	if current != nil && current.Annotations[WriteIDAnnotation] == c.token && c.sent != nil {
		// A write of this call landed, whatever its answer said (resolve, 1).
		return true, c.landed(current)
	}
	var listRV string // while absent: the collection's resourceVersion, for a create (resolve, 3)
	if absent && e.opts.CreateIfMissing {
		if listRV, err = c.collectionVersion(ctx); err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "list", e.target.String())
		}
	}
	if c.pending != nil {
		landed, err := c.resolve(ctx, current, listRV)
		switch {
		case err != nil:
			return !IsRetryable(err) && ctx.Err() == nil, err
		case landed != nil:
			return true, c.landed(landed)
		}
	}
	create := current == nil
	if create {
		if !e.opts.CreateIfMissing {
			// Not found, and no write of ours pending: none was lost, or
			// the first change after it was the deletion (resolve, 2).
			return true, APIError(getErr, "get", e.target.String())
		}
		current = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: e.target.Name, Namespace: e.target.Namespace}}
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
	e.stampReplaced(current, work)
	res.Changed, res.Created = true, create
	if !create {
		res.Old = current
	}
	res.New = work
	if e.opts.DryRun == DryRunClient {
		return true, nil
	}
	if busy != nil {
		select {
		case err := <-busy:
			if errors.Is(err, errQueueBusy) {
				return false, errQueueBusy
			}
			if err != nil {
				return true, err // a panic: an internal error
			}
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if reason, err := e.recheckLeader(ctx); err != nil || reason != "" {
		if err != nil {
			return !IsRetryable(err) && ctx.Err() == nil, err
		}
		if c.pending != nil {
			return true, c.unknown(errors.Join(c.pending.cause, errors.New(reason)))
		}
		res.Changed, res.Created, res.Old, res.New = false, false, nil, nil
		res.Skipped, res.SkipReason = true, reason
		return true, nil
	}
	if before != nil && !create && e.opts.DryRun == DryRunNone {
		if err := before(ctx, current); err != nil {
			return true, err
		}
	}
	c.sent = &sentWrite{replaced: res.Old}
	var written *corev1.ConfigMap
	if create {
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
			if create {
				p.kind, p.precondition = pendingCreate, listRV
			}
			c.pending = p
		}
		return !IsRetryable(err) && ctx.Err() == nil, APIError(err, "update", e.target.String())
	}
	c.pending = nil
	res.New = written
	return true, nil
}

// landed records that a write of this call landed and made cm.
func (c *call) landed(cm *corev1.ConfigMap) error {
	res := c.res
	res.Changed, res.Recovered, res.New = true, true, cm
	res.Old, res.Created = c.sent.replaced, c.sent.replaced == nil
	c.pending = nil
	return nil
}
