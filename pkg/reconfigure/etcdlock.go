package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The etcd lock: one etcd member of the cluster is changed at a time,
// whoever changes it (reconfigure by hand on one node, an agent's turn in a
// rollout on another). pkg/etcd's preflight only checks: two nodes could
// both pass it at the same moment, then both restart their members and the
// cluster would lose quorum. So a change takes a Lease first, created
// exclusively in kubeadm-config's namespace, renewed while it is held, and
// deleted once the member is back (or rolled back). A holder that died
// leaves its Lease behind; it is reaped by observation, never by comparing
// clocks: a Lease seen unchanged for its whole leaseDurationSeconds, as
// this process measures time, is taken over.

// EtcdLockLease is the Lease held by whoever is changing an etcd member
// of the cluster, in kubeadm-config's namespace. Its holderIdentity names
// the process (reconfigure/NODE/..., agent/NODE/...).
const EtcdLockLease = "kubeadmcfg-etcd-member"

// EtcdLockLabel is set on the lock's Lease; its value is the node whose
// member is being changed.
const EtcdLockLabel = "kubeadmcfg.io/etcd-member"

// The lock's timing: it is renewed every etcdLockRenew, and taken for
// abandoned once seen unrenewed for its duration. The duration is long
// beside a renewal, as renewals go through an API whose storage is losing
// and regaining a member meanwhile.
const (
	etcdLockRenew    = 5 * time.Second
	etcdLockDuration = time.Minute
)

// EtcdBusyError is the etcd lock held by a live holder: another member is
// being changed.
type EtcdBusyError struct {
	// Lease is namespace/name; Holder its holderIdentity, Node the node
	// whose member it changes.
	Lease, Holder, Node string
}

func (e *EtcdBusyError) Error() string {
	return fmt.Sprintf("another etcd member is being changed (on node %s, by %s, which holds lease %s and renews it); one member is changed at a time: try again once it is done",
		orUnknown(e.Node), e.Holder, e.Lease)
}

// lockEtcd takes the etcd lock for node, as holder. A Lease another holder
// renews is a live change: refused with an EtcdBusyError (exit 4) as soon
// as it is seen renewed, or waited for while patience lasts (a put-back,
// which must happen). One not renewed for its duration is taken over.
func lockEtcd(ctx context.Context, e *engine.Engine, node, holder string, now func() time.Time, patience time.Duration) (*engine.HeldLease, error) {
	obs := &engine.LeaseObserver{Default: etcdLockDuration}
	var seenNode string
	giveUp := time.Now().Add(patience)
	where := e.Target().Namespace + "/" + EtcdLockLease
	for {
		lease, err := e.HoldLease(ctx, engine.HeldLeaseSpec{
			Name: EtcdLockLease, Holder: holder, Labels: map[string]string{EtcdLockLabel: node},
			Interval: etcdLockRenew, Duration: etcdLockDuration, Now: now,
			Free: func(l *coordinationv1.Lease) bool { seenNode = l.Labels[EtcdLockLabel]; return obs.Abandoned(l) },
		})
		var held *engine.HeldByAnotherError
		switch {
		case err == nil:
			return lease, nil
		case !errors.As(err, &held):
			return nil, err
		case obs.Renewed() && time.Now().After(giveUp):
			return nil, exitcode.New(exitcode.Conflict, &EtcdBusyError{Lease: where, Holder: held.Holder, Node: seenNode})
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("interrupted while waiting for lease %s: %w", where, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
