// Package queue makes writers that keep losing a compare-and-swap take turns
// instead of colliding: a fair FIFO queue built from coordination.k8s.io
// Lease objects, ordered by the server's resourceVersion at creation, the way
// etcd's own mutex orders waiters by revision.
//
// Each waiter creates a Lease, watches only the Lease just ahead of it, and
// goes when that one is gone. A waiter renews its Lease while it waits or
// holds the turn; a Lease that has not changed for its whole duration (the
// TTL its own writer chose, whatever the waiter's), as seen by the waiter
// behind it, belongs to a writer that died, and is deleted. So a killed
// writer delays the others by at most its TTL. A writer whose time budget
// is shorter than that cannot outwait it and gives up; the first writer
// with more time removes it.
//
// A writer of this host that has exited is told at once, without waiting:
// each Lease names its writer's process (ProcessAnnotation), and a writer
// that finds the Lease of a process of its own host that no longer runs
// deletes it, even when it only looks whether writers are queued (Busy).
// The Lease of a writer of another host can only be judged by staleness.
//
// Staleness is judged only by what this process observes, on its own
// monotonic clock: how long a Lease's resourceVersion has stayed the same
// since this process first saw it (as client-go's leader election does). A
// Lease's renewTime is written for people and tools to read, never compared
// with this host's clock, so a host whose clock is off by an hour neither
// deletes live Leases nor keeps dead ones.
//
// A writer deletes its Lease when its turn is done, also when its context
// has ended: the deletion gets its own short budget (CleanupBudget) past
// the context's deadline or cancellation, so a command may end up to that
// long after its time budget. Without it, a writer that timed out would
// leave its Lease, and with a deadline not longer than the TTL every later
// writer would queue behind it, time out and leave its own in turn.
//
// The queue only orders writers that take part. The compare-and-swap on the
// ConfigMap stays the correctness guarantee, for them and for every writer
// that does not (kubeadm, kubectl edit, other tools).
package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
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
	// Clock stamps the acquire and renew times this writer writes (the
	// real clock when nil). It decides nothing.
	Clock clock.PassiveClock
}

func (q *Queue) ttl() time.Duration {
	if q.TTL <= 0 {
		return DefaultTTL
	}
	return q.TTL
}

func (q *Queue) now() metav1.MicroTime {
	if q.Clock == nil {
		return metav1.NowMicro()
	}
	return metav1.NewMicroTime(q.Clock.Now())
}

// Acquire joins the queue and blocks until this writer is at its head. The
// returned release must be called when the turn is done; it deletes the
// Lease, within CleanupBudget even when ctx has ended, and returns the panic
// that stopped the Lease's renewal early, if one did (an internal error;
// failed renewals are otherwise not errors: the compare-and-swap guards the
// write). Renewal stops when ctx ends.
func (q *Queue) Acquire(ctx context.Context) (release func() error, err error) {
	leases := q.Client.Leases(q.Namespace)
	now := q.now()
	seconds := int32(min(max(q.ttl()/time.Second, 1), 3600))
	var annotations map[string]string
	if mark := processMark(); mark != "" {
		annotations = map[string]string{ProcessAnnotation: mark}
	}
	// Take a free slot, starting anywhere so writers rarely try the same one.
	var mine *coordinationv1.Lease
	start := rand.IntN(Slots) //nolint:gosec // spreads writers over slots; no secret
	for i := range Slots {
		mine, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:        SlotName(q.Name, (start+i)%Slots),
				Labels:      map[string]string{managed.Label: managed.By, QueueLabel: q.Name},
				Annotations: annotations,
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
	w := &waiter{Queue: q, mine: mine.Name, seen: mine.ResourceVersion, observed: map[string]observation{}}

	renewCtx, stopRenew := context.WithCancel(ctx)
	renewed := crash.Go(func() error {
		q.renew(renewCtx, mine.Name, mine.UID, mine.ResourceVersion)
		return nil
	})
	release = func() error {
		stopRenew()
		renewErr := <-renewed // a panic of the renewal
		// The turn's context may have ended, by its deadline or an
		// interrupt; deleting the Lease must still happen, or every later
		// writer queues behind it.
		dctx, cancel := q.cleanupContext(ctx)
		defer cancel()
		// Only our own copy: if ours expired and the slot was taken again,
		// the new holder's Lease is not ours to delete.
		_ = leases.Delete(dctx, mine.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &mine.UID}})
		// A writer that died behind us would leave its Lease for good if no
		// one queued after it: remove the ones we saw unchanged for too long.
		w.reapStale(dctx)
		return renewErr
	}
	fail := func(err error) (func() error, error) {
		if rerr := release(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	if _, err := resourceversion.CompareResourceVersion(mine.ResourceVersion, mine.ResourceVersion); err != nil {
		return fail(fmt.Errorf("cannot order the write queue: %w", err))
	}
	if err := w.waitForTurn(ctx); err != nil {
		return fail(err)
	}
	return release, nil
}

// CleanupBudget is the most time a writer takes, past the end of its
// context, to delete its own Lease (and the dead ones it saw): a TTL, but
// no more than this. A command may therefore end up to this long after its
// time budget.
const CleanupBudget = 2 * time.Second

// cleanupContext outlives ctx, its deadline and cancellation alike, by at
// most CleanupBudget (or the TTL, when shorter): a writer that ran out of
// time must still remove its Lease, which a context already past its
// deadline would never send.
func (q *Queue) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), min(q.ttl(), CleanupBudget))
}

// Busy reports whether writers are queued: any Lease in the queue whose
// writer is not known to have exited. A Lease whose writer ran on this host
// and is gone (see ProcessAnnotation) is deleted here, so one a killed
// writer left never makes a newcomer queue. Whether any other Lease is alive
// cannot be told at a glance without comparing clocks, so a dead one makes a
// newcomer queue behind it and remove it after its duration. An error
// counts as not busy: the compare-and-swap still guards the write.
func (q *Queue) Busy(ctx context.Context) bool {
	leases := q.Client.Leases(q.Namespace)
	// Served from the apiserver's cache ("0"): a hint needs no quorum read,
	// and a consistent list of an idle resource can wait ~100 ms for etcd's
	// progress notification. A copy that is out of date is not deleted: the
	// deletion is conditional on its resourceVersion.
	list, err := leases.List(ctx, metav1.ListOptions{
		LabelSelector: QueueLabel + "=" + q.Name, ResourceVersion: "0"})
	if err != nil {
		return false
	}
	busy := false
	for i := range list.Items {
		if l := &list.Items[i]; !exited(l) || !reap(ctx, leases, l) {
			busy = true
		}
	}
	return busy
}

// renew keeps the Lease alive; every renewal records its position, which
// the new resourceVersion would otherwise lose.
func (q *Queue) renew(ctx context.Context, name string, uid types.UID, position string) {
	ticker := time.NewTicker(q.ttl() / 3)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		// The uid makes the patch fail on a slot someone else holds now.
		patch := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%q}},"spec":{"renewTime":%q}}`,
			uid, PositionAnnotation, position, q.now().UTC().Format(metav1.RFC3339Micro))
		_, _ = q.Client.Leases(q.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: managed.By})
	}
}

// positionOf is the resourceVersion at which l joined the queue: the one its
// first renewal recorded, else its own.
func positionOf(l *coordinationv1.Lease) string {
	if v, ok := l.Annotations[PositionAnnotation]; ok {
		return v
	}
	return l.ResourceVersion
}
