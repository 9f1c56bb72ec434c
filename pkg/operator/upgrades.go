package operator

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Upgrades carries out an operator's requests on the upgrade record for an
// upgrade the node agents carry out (upgrade-apply), from the API alone:
// start one after a preflight of the versions, the nodes, their agents and
// etcd, resume its failed step, wait for its end. Every change to the
// record is one compare-and-swap write through Record, so the plan's rules
// are checked against the record actually replaced, and of two operators
// who race exactly one wins. Each change is also an Event on the record,
// best effort.
//
// It leans on the rollout operator of the same namespace for what both
// kinds of work share: the rollout record (an upgrade waits while a rollout
// is active), the agents as their Leases show them, kubeadm-config, the API
// server's clock and who acts.
type Upgrades struct {
	// Record reads and writes the upgrade record's ConfigMap. Build it with
	// CreateIfMissing, so that the first upgrade creates the record.
	Record *engine.Engine
	// Rollouts is the rollout operator: its Read, Agents, Config (the
	// kubeadm-config an upgrade starts from), Now, By and StaleAfter are
	// the upgrade's too.
	Rollouts *Rollouts
}

// UpgradeChange is what an operation did to the upgrade record.
type UpgradeChange struct {
	// Record is the upgrade after the operation.
	Record *upgrade.Record
	// Changed is false when nothing was written.
	Changed bool
	// ResourceVersion is the record's resourceVersion after the operation,
	// where a wait for its end starts watching.
	ResourceVersion string
	// Warnings are what went wrong without stopping the operation.
	Warnings []string
}

func (o *Upgrades) clock() upgrade.Clock {
	return upgrade.Clock{Now: o.Rollouts.now(), By: o.Rollouts.By}
}

// recordName is the record as messages name it.
func (o *Upgrades) recordName() string {
	t := o.Record.Target()
	return t.Namespace + "/" + t.Name
}

// Read returns the upgrade record and the ConfigMap that holds it: a nil
// record when none was ever written (the ConfigMap may then be nil too);
// a damaged one is an error with exit code 3.
func (o *Upgrades) Read(ctx context.Context) (*upgrade.Record, *corev1.ConfigMap, error) {
	cm, err := o.Record.Get(ctx)
	if exitcode.FromError(err) == exitcode.NotFound {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	rec, _, err := upgrade.FromConfigMap(cm)
	return rec, cm, err
}

// noUpgrade is ErrNoUpgrade, naming where it was looked for (exit 5).
func (o *Upgrades) noUpgrade() error {
	return exitcode.New(exitcode.NotFound, fmt.Errorf("%w in configmap %s", upgrade.ErrNoUpgrade, o.recordName()))
}

// write runs op on the record in one compare-and-swap write and records
// event as an Event on it when the record changed. op may be run more than
// once, on ever newer copies of the record.
func (o *Upgrades) write(ctx context.Context, op upgrade.Op, event func(rec *upgrade.Record) (reason, message string)) (*UpgradeChange, error) {
	var change upgrade.Change
	res, err := o.Record.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		var err error
		change, err = upgrade.Apply(cm, op)
		return change.Changed, err
	})
	if err != nil {
		if errors.Is(err, upgrade.ErrNoUpgrade) {
			return nil, o.noUpgrade()
		}
		return nil, err
	}
	if change.After == nil {
		return nil, o.noUpgrade()
	}
	out := &UpgradeChange{Record: change.After, Changed: res.Changed}
	if res.New != nil {
		out.ResourceVersion = res.New.ResourceVersion
	}
	if res.Changed && res.New != nil && event != nil {
		reason, message := event(change.After)
		if err := o.Record.Event(ctx, res.New, corev1.EventTypeNormal, reason, message); err != nil {
			out.Warnings = append(out.Warnings, "the change was recorded, but not its Event: "+err.Error())
		}
	}
	return out, nil
}
