package engine

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// LeaseObserver judges a Lease another holder has by watching it change, on
// this process's monotonic clock, never by comparing its renewTime with a
// clock: on an HA control plane every API server stamps times with its own
// host's clock, and a holder renewing through one server looks stale, or
// alive, through another whose clock is off. A Lease seen unchanged (the
// same resourceVersion) for its whole leaseDurationSeconds is abandoned;
// one seen to change is alive. It watches one Lease name; the zero
// LeaseObserver has seen nothing yet.
type LeaseObserver struct {
	// Default is the duration of a Lease that states none.
	Default time.Duration

	version string    // the resourceVersion last seen
	since   time.Time // when it was first seen
	renewed bool      // it changed while watched: its holder is alive
}

// Abandoned is HeldLeaseSpec.Free: whether l has gone unchanged for its
// whole duration while watched. The first look at a Lease never finds it
// abandoned.
func (o *LeaseObserver) Abandoned(l *coordinationv1.Lease) bool {
	if l.ResourceVersion != o.version {
		o.renewed = o.version != ""
		o.version, o.since = l.ResourceVersion, time.Now()
		return false
	}
	return time.Since(o.since) > LeaseDuration(l, o.Default)
}

// Renewed reports whether the Lease was seen to change while watched: its
// holder is alive.
func (o *LeaseObserver) Renewed() bool { return o.renewed }

// LeaseDuration is l's leaseDurationSeconds, or def when it states none.
func LeaseDuration(l *coordinationv1.Lease, def time.Duration) time.Duration {
	if s := l.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		return time.Duration(*s) * time.Second
	}
	return def
}
