package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Waiting for the turn: ordering the queue, watching the Lease ahead, and
// telling a dead writer's Lease from a live one.

// member is a Lease in the queue, ordered by its position.
type member struct {
	name     string
	rv       string
	position string // the resourceVersion at which it joined
	// duration is how long its writer may go without renewing it.
	duration time.Duration
}

// observation is when this process first saw a Lease at a resourceVersion.
type observation struct {
	rv    string
	since time.Time // monotonic
}

// waiter is one writer waiting for its turn.
type waiter struct {
	*Queue
	mine     string
	seen     string                 // the newest resourceVersion this waiter has observed
	observed map[string]observation // other Leases, as this waiter has seen them
}

// observe records l and reports how long it has stayed unchanged, as seen
// from here.
func (w *waiter) observe(l *coordinationv1.Lease) time.Duration {
	o, ok := w.observed[l.Name]
	if !ok || o.rv != l.ResourceVersion {
		o = observation{rv: l.ResourceVersion, since: time.Now()}
		w.observed[l.Name] = o
	}
	return time.Since(o.since)
}

// duration is how long l's writer may go without renewing it: its own
// LeaseDurationSeconds, which it renews three times within, not this
// writer's TTL (the two may differ).
func (q *Queue) duration(l *coordinationv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return q.ttl()
}

// staleAfter is how long a Lease may stay unchanged before its writer is
// taken for dead: its own duration plus a TTL of grace.
func (w *waiter) staleAfter(l *coordinationv1.Lease) time.Duration {
	return w.duration(l) + w.ttl()
}

// reap deletes l if it is still the copy observed; it reports whether l is
// gone.
func reap(ctx context.Context, leases coordinationv1client.LeaseInterface, l *coordinationv1.Lease) bool {
	err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
	return err == nil || apierrors.IsNotFound(err)
}

// reapStale removes the Leases this waiter saw unchanged for longer than
// they may be, or whose writer it knows has exited.
func (w *waiter) reapStale(ctx context.Context) {
	if len(w.observed) == 0 {
		return
	}
	leases := w.Client.Leases(w.Namespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: QueueLabel + "=" + w.Name})
	if err != nil {
		return
	}
	for i := range list.Items {
		l := &list.Items[i]
		if l.Name == w.mine {
			continue
		}
		o, ok := w.observed[l.Name]
		if (ok && o.rv == l.ResourceVersion && time.Since(o.since) > w.staleAfter(l)) || exited(l) {
			reap(ctx, leases, l)
		}
	}
}

// waitForTurn lists the queue, and while a Lease is ahead of ours, watches
// the one just ahead until it is deleted, or deletes it once it has gone a
// whole TTL without change.
func (w *waiter) waitForTurn(ctx context.Context) error {
	q, mine := w.Queue, w.mine
	leases := q.Client.Leases(q.Namespace)
	for {
		// A list at least as new as what we have seen, served from the
		// apiserver's cache: it holds our own Lease and every Lease ahead of
		// it, without the wait of a quorum read.
		list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: QueueLabel + "=" + q.Name,
			ResourceVersion: w.seen, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			return fmt.Errorf("list the write queue: %w", err)
		}
		var members []member
		for i := range list.Items {
			l := &list.Items[i]
			if l.Name != mine && (w.observe(l) > w.staleAfter(l) || exited(l)) && reap(ctx, leases, l) {
				continue
			}
			members = append(members, member{name: l.Name, rv: l.ResourceVersion, position: positionOf(l), duration: q.duration(l)})
		}
		var orderErr error
		slices.SortFunc(members, func(a, b member) int {
			c, err := resourceversion.CompareResourceVersion(a.position, b.position)
			if err != nil {
				orderErr = err
			}
			if c != 0 {
				return c
			}
			return strings.Compare(a.name, b.name)
		})
		if orderErr != nil {
			// A position that does not parse cannot be ordered: stop using
			// the queue rather than guess (the caller falls back to backoff).
			return fmt.Errorf("cannot order the write queue: %w", orderErr)
		}
		i := slices.IndexFunc(members, func(m member) bool { return m.name == mine })
		if i < 0 {
			return fmt.Errorf("our Lease left the write queue (deleted as expired?)")
		}
		if i == 0 {
			return nil
		}
		gone, seen, err := q.waitGone(ctx, members[i-1], list.ResourceVersion)
		if err != nil {
			return err
		}
		if !gone && seen == "" {
			// The watch ended or failed: pause before listing again rather
			// than spin against a struggling apiserver.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait.Jitter(50*time.Millisecond, 1)):
			}
		}
		if seen != "" {
			w.seen = seen
		}
		// The head left and we were right behind it: any Lease created since
		// is behind us, so the turn is ours without listing again.
		if gone && i == 1 {
			return nil
		}
	}
}

// waitGone returns when the Lease ahead is deleted, deleting it itself when
// it has not changed for its whole duration (its writer died): the duration
// its own writer chose, which that writer renews three times within, not
// this waiter's TTL. gone is false when it cannot tell, and the caller
// should list again.
func (q *Queue) waitGone(ctx context.Context, ahead member, fromRV string) (gone bool, seen string, err error) {
	leases := q.Client.Leases(q.Namespace)
	w, err := leases.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", ahead.name).String(),
		ResourceVersion: fromRV,
	})
	if err != nil {
		return false, "", fmt.Errorf("watch the write queue: %w", err)
	}
	defer w.Stop()
	rv, patience := ahead.rv, ahead.duration
	timer := time.NewTimer(patience)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-timer.C:
			// No renewal for its whole duration: its writer is gone. Delete
			// it only if it is still the copy we saw.
			err := leases.Delete(ctx, ahead.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
			if err == nil || apierrors.IsNotFound(err) {
				return false, "", nil // the writer ahead of it may still be alive: list again
			}
			if !apierrors.IsConflict(err) {
				return false, "", fmt.Errorf("remove an expired Lease from the write queue: %w", err)
			}
			return false, "", nil // renewed meanwhile: list and watch again
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, "", nil // the watch ended: list again
			}
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && l.Name != ahead.name {
				continue // the field selector is the server's; a fake client may not apply it
			}
			switch ev.Type {
			case watch.Deleted:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					return true, l.ResourceVersion, nil
				}
				return true, "", nil
			case watch.Modified:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					rv, patience = l.ResourceVersion, q.duration(l)
				}
				timer.Reset(patience)
			case watch.Error:
				return false, "", nil
			}
		}
	}
}
