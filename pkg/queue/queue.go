// Package queue makes writers that keep losing a compare-and-swap take turns
// instead of colliding: a fair FIFO queue built from coordination.k8s.io
// Lease objects, ordered by the server's resourceVersion at creation, the way
// etcd's own mutex orders waiters by revision.
//
// Each waiter creates a Lease, watches only the Lease just ahead of it, and
// goes when that one is gone. A waiter renews its Lease while it waits or
// holds the turn; a Lease that has not changed for a whole TTL, as seen by the
// waiter behind it, belongs to a writer that died, and is deleted. So a killed
// writer delays the others by at most the TTL.
//
// The queue only orders writers that take part. The compare-and-swap on the
// ConfigMap stays the correctness guarantee, for them and for every writer
// that does not (kubeadm, kubectl edit, other tools).
package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
)

// Labels and annotations on queue Leases.
const (
	// QueueLabel names the ConfigMap a Lease queues for.
	QueueLabel = "kubeadmcfg.io/queue"
	// PositionAnnotation keeps a Lease's place once a renewal has changed
	// its resourceVersion.
	PositionAnnotation = "kubeadmcfg.io/queue-position"
)

// DefaultTTL is how long a Lease may go unrenewed before the writer behind
// it takes it for dead.
const DefaultTTL = 5 * time.Second

// Slots is how many writers of one ConfigMap can queue at once. Queue
// Leases have fixed names, so that a Role can grant get, patch and delete on
// those names alone and never on the namespace's other Leases (a controller's
// leader election, say); a writer that finds every slot taken falls back to
// backoff.
const Slots = 64

// SlotName is the name of one queue Lease of a ConfigMap.
func SlotName(configMap string, slot int) string {
	return fmt.Sprintf("kubeadmcfg-turn-%s-%02d", configMap, slot)
}

// Queue is the queue of writers of one ConfigMap.
type Queue struct {
	Client    coordinationv1client.LeasesGetter
	Namespace string
	// Name is the ConfigMap's name; Leases are named after it.
	Name     string
	Identity string
	TTL      time.Duration
}

func (q *Queue) ttl() time.Duration {
	if q.TTL <= 0 {
		return DefaultTTL
	}
	return q.TTL
}

// member is a Lease in the queue, with when this waiter last saw it change.
type member struct {
	name     string
	rv       string
	position uint64
}

// Acquire joins the queue and blocks until this writer is at its head. The
// returned release must be called when the turn is done; it deletes the
// Lease.
func (q *Queue) Acquire(ctx context.Context) (release func(), err error) {
	leases := q.Client.Leases(q.Namespace)
	ttl := q.ttl()
	now := metav1.NowMicro()
	seconds := int32(min(max(ttl/time.Second, 1), 3600))
	// Take a free slot, starting anywhere so writers rarely try the same one.
	var mine *coordinationv1.Lease
	start := rand.IntN(Slots) //nolint:gosec // spreads writers over slots; no secret
	for i := range Slots {
		mine, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:   SlotName(q.Name, (start+i)%Slots),
				Labels: map[string]string{managed.Label: managed.By, QueueLabel: q.Name},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &q.Identity, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{FieldManager: managed.By})
		if !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("join the write queue: %w", err)
	}
	position, _ := strconv.ParseUint(mine.ResourceVersion, 10, 64)

	renewCtx, stopRenew := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); q.renew(renewCtx, mine.Name, mine.UID, position) }()
	w := &waiter{Queue: q, mine: mine.Name, seen: mine.ResourceVersion}
	release = func() {
		stopRenew()
		wg.Wait()
		// The turn's context may be over; deleting the Lease must still happen.
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Only our own copy: if ours expired and the slot was taken again,
		// the new holder's Lease is not ours to delete.
		_ = leases.Delete(dctx, mine.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &mine.UID}})
		// A writer that died behind us would leave its Lease for good if no
		// one queued after it: remove the ones that have expired.
		if w.sawStale {
			if list, err := leases.List(dctx, metav1.ListOptions{LabelSelector: QueueLabel + "=" + q.Name}); err == nil {
				for i := range list.Items {
					q.reapIfExpired(dctx, &list.Items[i])
				}
			}
		}
	}
	if err := w.waitForTurn(ctx); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// Busy reports whether writers are queued (a Lease exists that has not
// expired). An error counts as not busy: the compare-and-swap still guards
// the write.
func (q *Queue) Busy(ctx context.Context) bool {
	// Served from the apiserver's cache ("0"): a hint needs no quorum read,
	// and a consistent list of an idle resource can wait ~100 ms for etcd's
	// progress notification.
	list, err := q.Client.Leases(q.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: QueueLabel + "=" + q.Name, ResourceVersion: "0"})
	if err != nil {
		return false
	}
	for i := range list.Items {
		l := &list.Items[i]
		if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil ||
			time.Since(l.Spec.RenewTime.Time) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			return true
		}
	}
	return false
}

// renew keeps the Lease alive; the first renewal records its position, which
// the new resourceVersion would otherwise lose.
func (q *Queue) renew(ctx context.Context, name string, uid types.UID, position uint64) {
	ticker := time.NewTicker(q.ttl() / 3)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		// The uid makes the patch fail on a slot someone else holds now.
		patch := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:"%d"}},"spec":{"renewTime":%q}}`,
			uid, PositionAnnotation, position, metav1.NowMicro().UTC().Format(metav1.RFC3339Micro))
		_, _ = q.Client.Leases(q.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: managed.By})
	}
}

// waiter is one writer waiting for its turn.
type waiter struct {
	*Queue
	mine     string
	seen     string // the newest resourceVersion this waiter has observed
	sawStale bool   // a Lease looked unrenewed for a while
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
			if l.Name == mine {
				members = append(members, member{name: l.Name, rv: l.ResourceVersion, position: positionOf(l)})
				continue
			}
			if q.reapIfExpired(ctx, l) {
				continue
			}
			if l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) > q.ttl() {
				w.sawStale = true
			}
			members = append(members, member{name: l.Name, rv: l.ResourceVersion, position: positionOf(l)})
		}
		slices.SortFunc(members, func(a, b member) int {
			if a.position != b.position {
				return compare(a.position, b.position)
			}
			return compare(a.name, b.name)
		})
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
// it has not changed for a whole TTL (its writer died). gone is false when
// it cannot tell, and the caller should list again.
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
	rv := ahead.rv
	timer := time.NewTimer(q.ttl())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-timer.C:
			// No renewal for a whole TTL: its writer is gone. Delete it only if
			// it is still the copy we saw.
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
			switch ev.Type {
			case watch.Deleted:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					return true, l.ResourceVersion, nil
				}
				return true, "", nil
			case watch.Modified:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					rv = l.ResourceVersion
				}
				timer.Reset(q.ttl())
			case watch.Error:
				return false, "", nil
			}
		}
	}
}

// reapIfExpired deletes a Lease whose holder let it expire by its own
// renewTime and duration (with a TTL of grace for clock skew), and reports
// whether it is gone.
func (q *Queue) reapIfExpired(ctx context.Context, l *coordinationv1.Lease) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	expiry := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second + q.ttl())
	if time.Now().Before(expiry) {
		return false
	}
	err := q.Client.Leases(q.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
	return err == nil || apierrors.IsNotFound(err)
}

func positionOf(l *coordinationv1.Lease) uint64 {
	if v, ok := l.Annotations[PositionAnnotation]; ok {
		if p, err := strconv.ParseUint(v, 10, 64); err == nil {
			return p
		}
	}
	p, _ := strconv.ParseUint(l.ResourceVersion, 10, 64)
	return p
}

func compare[T int | uint64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
