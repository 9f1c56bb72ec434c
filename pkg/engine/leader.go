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
// An expired Lease has no holder. Expiry is decided the way client-go's
// leader election decides it, by observation here: a Lease whose renewTime
// plus duration has passed by this host's clock is watched for one lease
// duration, and counts as expired only if it did not change meanwhile. So a
// holder that is alive on a host whose clock is behind is never taken for
// dead; the renewTime only decides whether to look closer.
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

// liveLease returns the Lease as its holder keeps it, or nil when it has
// expired: not renewed during one lease duration of watching.
func (e *Engine) liveLease(ctx context.Context, lease *coordinationv1.Lease, name string) (*coordinationv1.Lease, error) {
	spec := lease.Spec
	if spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
		return lease, nil // not a lease that expires
	}
	duration := time.Duration(*spec.LeaseDurationSeconds) * time.Second
	if time.Now().Before(spec.RenewTime.Add(duration)) {
		return lease, nil
	}
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
