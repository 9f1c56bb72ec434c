package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// checkLeader runs the leader guard: it returns a non-empty reason when this
// process must not write. It matches the Lease's holderIdentity exactly, or
// in the "<identity>_<suffix>" form that kube-controller-manager and
// kube-scheduler write. This is how "only the active controller writes" is
// said without a platform-specific check.
//
// An expired Lease has no holder. A Lease that names this process is
// trusted only once it is seen renewed: it is watched for up to one lease
// duration, and counts as expired if it did not change meanwhile, as
// client-go's leader election judges a leader by observation. Its renewTime
// is never compared with a clock: it was stamped by its holder's clock, and
// a host whose clock is behind that one (or that stepped back since) would
// take a dead Lease for alive, and write beside the next holder. A Lease
// that names another holder is not watched: alive or expired, it is not
// this process's.
func (e *Engine) checkLeader(ctx context.Context) (string, error) {
	l := e.opts.Leader
	if l == nil {
		return "", nil
	}
	name := fmt.Sprintf("lease %s/%s", l.Namespace, l.Name)
	lease, err := e.client.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return "", APIError(err, "get", name)
	}
	if reason := l.notHolder(lease, name); reason != "" {
		return reason, nil
	}
	if lease, err = e.liveLease(ctx, lease, name); err != nil {
		return "", err
	}
	if lease == nil {
		return fmt.Sprintf("%s has expired: no one holds it", name), nil
	}
	return l.notHolder(lease, name), nil
}

// recheckLeader reads the Lease again right before a write: leadership may
// have moved since checkLeader, up to the whole time budget earlier (a
// queued or retried write). It compares the holder only and does not watch:
// whether the Lease had expired was judged once, by checkLeader.
//
// This narrows the window in which a process that lost the Lease still
// writes to one round trip, but does not close it: the API server does not
// look at the Lease when it takes the write, so the write is not fenced. An
// edit that is not idempotent (an append) may be applied twice when
// leadership moves between this check and the write and both holders write.
func (e *Engine) recheckLeader(ctx context.Context) (string, error) {
	l := e.opts.Leader
	if l == nil {
		return "", nil
	}
	name := fmt.Sprintf("lease %s/%s", l.Namespace, l.Name)
	lease, err := e.client.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return "", APIError(err, "get", name)
	}
	return l.notHolder(lease, name), nil
}

// notHolder returns why l.Identity does not hold lease, or "" when it does.
func (l *Leader) notHolder(lease *coordinationv1.Lease, name string) string {
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if l.Identity != "" && (holder == l.Identity || strings.HasPrefix(holder, l.Identity+"_")) {
		return ""
	}
	if holder == "" {
		holder = "none"
	}
	return fmt.Sprintf("not the holder of %s (holder: %s)", name, holder)
}

// liveLease returns the Lease as its holder keeps it, once it has been seen
// renewed (any change of it), or nil when it has expired: not renewed
// during one lease duration of watching. A live holder renews well within
// its duration (kube-controller-manager every 2 seconds of 15), so this
// costs about one renewal period.
func (e *Engine) liveLease(ctx context.Context, lease *coordinationv1.Lease, name string) (*coordinationv1.Lease, error) {
	spec := lease.Spec
	if spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
		return lease, nil // not a lease that expires
	}
	duration := time.Duration(*spec.LeaseDurationSeconds) * time.Second
	w, err := e.client.CoordinationV1().Leases(lease.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", lease.Name).String(),
		ResourceVersion: lease.ResourceVersion,
	})
	if err != nil {
		return nil, APIError(err, "watch", name)
	}
	defer w.Stop()
	timer := time.NewTimer(duration)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, APIError(ctx.Err(), "watch", name)
		case <-timer.C:
			return nil, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, APIError(fmt.Errorf("the watch ended"), "watch", name)
			}
			if renewed, ok := ev.Object.(*coordinationv1.Lease); ok && renewed.Name == lease.Name {
				switch ev.Type {
				case watch.Modified:
					return renewed, nil
				case watch.Deleted:
					return nil, nil
				}
			}
		}
	}
}
