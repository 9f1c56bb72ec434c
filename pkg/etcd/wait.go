package etcd

import (
	"context"
	"fmt"
	"time"
)

// The defaults of WaitOptions.
const (
	// DefaultWait is how long a changed member has to come back: etcd
	// replays its WAL and catches up in seconds, kubeadm's startup probe
	// allows it 4 minutes before the kubelet restarts it.
	DefaultWait = 2 * time.Minute
	// DefaultInterval is how often the cluster is read while waiting.
	DefaultInterval = time.Second
	// DefaultMaxLag is how many raft entries the member may still be
	// behind the leader and count as caught up: a busy cluster commits a
	// few hundred a second, and a member that is thousands behind is still
	// being sent a snapshot.
	DefaultMaxLag = 1000
)

// WaitOptions say how long and how closely WaitBack waits.
type WaitOptions struct {
	Wait     time.Duration
	Interval time.Duration
	// MaxLag is how far, in raft entries, the member's applied index may be
	// behind the leader's committed index.
	MaxLag uint64
}

func (o WaitOptions) withDefaults() WaitOptions {
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxLag == 0 {
		o.MaxLag = DefaultMaxLag
	}
	return o
}

// WaitBack waits until the local member, changed since Preflight returned
// before, is back (see CheckBack), reading the cluster every Interval for
// at most Wait. It returns the cluster as last read; a member not back in
// time is a *NotBackError, which the caller turns into a rollback.
func (c *Client) WaitBack(ctx context.Context, before Member, opts WaitOptions) (*Cluster, error) {
	opts = opts.withDefaults()
	start := time.Now()
	deadline := start.Add(opts.Wait)
	for {
		cl, err := c.Cluster(ctx)
		var why string
		if err != nil {
			why = err.Error()
		} else if why = CheckBack(cl, before, opts.MaxLag); why == "" {
			return cl, nil
		}
		if !time.Now().Add(opts.Interval).Before(deadline) {
			return cl, &NotBackError{Member: before, Wait: opts.Wait, Last: why}
		}
		select {
		case <-ctx.Done():
			return cl, fmt.Errorf("interrupted while waiting for %s: %w", before, ctx.Err())
		case <-time.After(opts.Interval):
		}
	}
}

// CheckBack judges whether the member before, as Preflight saw it, is back
// in cl: the node's endpoints answer as the same member ID (its data
// directory is the one it had), the member list has it started and voting,
// its applied index is within maxLag of the leader's committed index, and
// every member is healthy with no alarm. It returns what is not so yet, or
// "".
func CheckBack(cl *Cluster, before Member, maxLag uint64) string {
	if cl.Local != before.ID {
		return fmt.Sprintf("this node's endpoints answer as member %x, not %x (was its data directory replaced?)", cl.Local, before.ID)
	}
	m, ok := cl.Member(before.ID)
	switch {
	case !ok:
		return fmt.Sprintf("member %x is not in the member list", before.ID)
	case m.Name == "" || len(m.ClientURLs) == 0:
		return fmt.Sprintf("member %x has not started (the member list has no name or client URL for it)", m.ID)
	case m.Learner:
		return fmt.Sprintf("%s is a learner", m)
	}
	for _, other := range cl.Members {
		if !other.Healthy() {
			return fmt.Sprintf("%s is unhealthy: %s", other, other.Problem)
		}
	}
	if len(cl.Alarms) > 0 {
		return fmt.Sprintf("etcd %s is raised", cl.Alarms[0])
	}
	if cl.AlarmsErr != "" {
		return "the alarms cannot be listed: " + cl.AlarmsErr
	}
	leader, ok := cl.Member(m.Status.Leader)
	if !ok || leader.Status == nil {
		return fmt.Sprintf("%s follows leader %x, which did not answer", m, m.Status.Leader)
	}
	if lag := leader.Status.RaftIndex - min(leader.Status.RaftIndex, m.Status.RaftAppliedIndex); lag > maxLag {
		return fmt.Sprintf("%s has applied raft index %d, %d behind the leader's %d (at most %d allowed)",
			m, m.Status.RaftAppliedIndex, lag, leader.Status.RaftIndex, maxLag)
	}
	return ""
}

// NotBackError is a changed member that did not come back healthy in time.
type NotBackError struct {
	Member Member
	Wait   time.Duration
	// Last is what was last seen wrong.
	Last string
}

func (e *NotBackError) Error() string {
	return fmt.Sprintf("%s did not come back within %s: %s", e.Member, e.Wait, e.Last)
}
