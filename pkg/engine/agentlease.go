package engine

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
)

// A long-lived heartbeat that says something: the node agent holds one
// Lease for as long as it runs, renewed on the API server's clock, and
// publishes its node's state in the Lease's annotations. Unlike a step's
// Heartbeat it lives for the whole process, is taken over only from a
// holder the caller judges gone, and is created again if someone deletes
// it; like it, every renewal is a compare-and-swap, and a Lease another
// holder took is noticed and given up.

// HeldLeaseSpec describes a HeldLease.
type HeldLeaseSpec struct {
	// Name is the Lease's name, in the engine's namespace.
	Name string
	// Holder is this process's identity, written as holderIdentity.
	Holder string
	// Labels are set on the Lease besides the managed label.
	Labels map[string]string
	// Interval is the time between renewals; Duration is written as
	// leaseDurationSeconds (3 × Interval when zero).
	Interval, Duration time.Duration
	// Now stamps acquireTime and renewTime: the API server's clock
	// (ServerClock.Now), so that readers judge ages on one clock.
	Now func() time.Time
	// Free says whether a Lease found under Name, held by another holder,
	// may be taken over (its holder is gone). Nil: never.
	Free func(l *coordinationv1.Lease) bool
}

// HeldLease is a Lease this process holds and renews until Stop.
type HeldLease struct {
	spec   HeldLeaseSpec
	leases coordinationv1client.LeaseInterface
	kick   chan struct{}
	stop   context.CancelFunc
	done   <-chan error

	mu          sync.Mutex
	annotations map[string]string
	lease       *coordinationv1.Lease
	err         error
	renewed     time.Time // the last write that renewed it, on the local monotonic clock
}

// HeldByAnotherError is a Lease that another live holder has.
type HeldByAnotherError struct {
	Lease, Holder string
}

func (e *HeldByAnotherError) Error() string {
	return fmt.Sprintf("lease %s is held by %s, which is alive", e.Lease, e.Holder)
}

// HoldLease takes the Lease spec.Name (creating it, or taking it over when
// spec.Free says its holder is gone) and renews it every spec.Interval
// until Stop. A Lease held by a live holder is refused with exit code 4
// (a HeldByAnotherError). ctx bounds the taking only.
func (e *Engine) HoldLease(ctx context.Context, spec HeldLeaseSpec) (*HeldLease, error) {
	if spec.Duration <= 0 {
		spec.Duration = 3 * spec.Interval
	}
	if spec.Now == nil {
		spec.Now = time.Now
	}
	h := &HeldLease{spec: spec, leases: e.leases(), kick: make(chan struct{}, 1), annotations: map[string]string{}}
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	if err := h.take(ctx); err != nil {
		return nil, err
	}
	renewCtx, stop := context.WithCancel(context.Background())
	h.stop = stop
	h.done = crash.Go(func() error { return h.renew(renewCtx) })
	return h, nil
}

func (h *HeldLease) object() string { return "lease " + h.spec.Name }

// want makes l this holder's, renewed now, with the annotations to publish.
func (h *HeldLease) want(l *coordinationv1.Lease, acquire bool) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	maps.Copy(l.Labels, h.spec.Labels)
	l.Labels[managed.Label] = managed.By
	h.mu.Lock()
	if len(h.annotations) > 0 && l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	maps.Copy(l.Annotations, h.annotations)
	h.mu.Unlock()
	holder := h.spec.Holder
	seconds := int32(min(math.Ceil(h.spec.Duration.Seconds()), math.MaxInt32))
	now := metav1.NewMicroTime(h.spec.Now())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &seconds, &now
	if acquire || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &now
	}
}

// take creates the Lease, or takes over the one found when it is this
// holder's or spec.Free lets it.
func (h *HeldLease) take(ctx context.Context) error {
	for {
		fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: h.spec.Name}}
		h.want(fresh, true)
		l, err := h.leases.Create(ctx, fresh, metav1.CreateOptions{FieldManager: managed.By})
		if apierrors.IsAlreadyExists(err) {
			if l, err = h.leases.Get(ctx, h.spec.Name, metav1.GetOptions{}); err == nil {
				if holder := holderOf(l); holder != h.spec.Holder && (h.spec.Free == nil || !h.spec.Free(l)) {
					return exitcode.New(exitcode.Conflict, &HeldByAnotherError{Lease: h.spec.Name, Holder: holder})
				}
				h.want(l, true)
				l, err = h.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: managed.By})
			}
		}
		if err == nil {
			h.wrote(l)
			return nil
		}
		if !IsRetryable(err) && !apierrors.IsNotFound(err) || ctx.Err() != nil {
			return APIError(err, "take", h.object())
		}
		select {
		case <-ctx.Done():
			return APIError(err, "take", h.object())
		case <-time.After(wait2ms() * 50):
		}
	}
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (h *HeldLease) set(l *coordinationv1.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease = l
}

// wrote keeps l, which a write of this holder's just returned: a renewal.
func (h *HeldLease) wrote(l *coordinationv1.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease, h.renewed = l, time.Now()
}

// Annotate sets an annotation and publishes it at once (the next renewal
// comes early).
func (h *HeldLease) Annotate(key, value string) {
	h.mu.Lock()
	h.annotations[key] = value
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Lease returns a copy of the Lease as last written.
func (h *HeldLease) Lease() *coordinationv1.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease.DeepCopy()
}

// renew renews the Lease every interval, and at once after Annotate, each
// time with a compare-and-swap on the copy last written. A conflict is
// looked into: the Lease of another uid or holder was taken over, and the
// renewing stops with that error (Done, Err); a Lease someone deleted is
// created again. It returns nil when stopped.
func (h *HeldLease) renew(ctx context.Context) error {
	ticker := time.NewTicker(h.spec.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-h.kick:
		}
		if err := h.renewOnce(ctx); err != nil {
			h.mu.Lock()
			h.err = err
			h.mu.Unlock()
			return err
		}
	}
}

// renewOnce makes one renewal; only an error that ends the holding is
// returned (a failed request is retried at the next tick).
func (h *HeldLease) renewOnce(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, max(h.spec.Interval, 5*time.Second))
	defer cancel()
	mine := h.Lease()
	next := mine.DeepCopy()
	h.want(next, false)
	updated, err := h.leases.Update(rctx, next, metav1.UpdateOptions{FieldManager: managed.By})
	switch {
	case err == nil:
		h.wrote(updated)
		return nil
	case apierrors.IsNotFound(err):
		// Deleted by someone: publish again. A Lease created meanwhile by
		// another holder makes this one give up.
		fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: h.spec.Name}}
		h.want(fresh, true)
		created, cerr := h.leases.Create(rctx, fresh, metav1.CreateOptions{FieldManager: managed.By})
		if cerr == nil {
			h.wrote(created)
			return nil
		}
		if !apierrors.IsAlreadyExists(cerr) {
			return nil // try again at the next tick
		}
	case !apierrors.IsConflict(err):
		return nil // try again at the next tick
	}
	current, err := h.leases.Get(rctx, h.spec.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	if holderOf(current) != h.spec.Holder {
		return fmt.Errorf("the lease %s was taken over by %q", h.spec.Name, holderOf(current))
	}
	h.set(current)
	select { // renew on the fresh copy at once
	case h.kick <- struct{}{}:
	default:
	}
	return nil
}

// Done receives why the renewing stopped before Stop (the Lease was taken
// over, or an internal error) and is closed; after Stop it is closed
// without a value.
func (h *HeldLease) Done() <-chan error { return h.done }

// Err says why the renewing stopped before Stop, if it did.
func (h *HeldLease) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Held says whether this process may act as the Lease's holder now: nil
// while the Lease is its own and was last renewed within half its
// duration. Past that, renewals have failed for so long that another
// process, watching the Lease go unchanged, may soon take it over: a holder
// that cannot show it holds the Lease must not act as if it did, so Held
// says why not, as it does once the Lease was taken over.
func (h *HeldLease) Held() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if since := time.Since(h.renewed); since > h.spec.Duration/2 {
		return fmt.Errorf("the lease %s was last renewed %s ago, more than half its %s: it may be taken over, so its holder is not sure it holds it",
			h.spec.Name, since.Round(time.Second), h.spec.Duration)
	}
	return nil
}

// Confirm renews the Lease now and returns nil only once a renewal was
// written: the proof a holder gives right before an act that must never
// happen twice at once (the restart of an etcd member). It tries a few
// times within ctx, as the renewing goroutine may write in between.
func (h *HeldLease) Confirm(ctx context.Context) error {
	start := time.Now()
	for range 3 {
		if err := h.Held(); err != nil && h.Err() != nil {
			return err
		}
		if err := h.renewOnce(ctx); err != nil {
			return err
		}
		h.mu.Lock()
		ok := h.renewed.After(start)
		h.mu.Unlock()
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("the lease %s could not be renewed just now, so its holder cannot show it still holds it", h.spec.Name)
}

// Stop stops renewing and deletes the Lease if it is still this holder's
// (bounded, best effort): a clean stop leaves no Lease to be taken for a
// lost holder.
func (h *HeldLease) Stop() error {
	h.stop()
	for range h.done { // drained: the renewing has ended
	}
	if h.Err() != nil {
		return nil // not ours any more
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Read first: the answer to the last renewal may have been lost.
	l, err := h.leases.Get(ctx, h.spec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && holderOf(l) != h.spec.Holder {
		return nil
	}
	if err == nil {
		err = h.leases.Delete(ctx, h.spec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return APIError(err, "delete", h.object())
	}
	return nil
}
