package reconfigure

import (
	"context"
	"slices"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// PutBackRequest puts a node's components back on manifests they ran
// before: the manifest backups a reconfiguration kept.
type PutBackRequest struct {
	// Manifests are the manifests to put back, by component; a component
	// left out is not touched.
	Manifests map[controlplane.Component][]byte
	// Wait is how long each component may take to come up healthy.
	Wait     time.Duration
	Progress func(Event)
	// Locked says that the caller holds the manifests directory's lock
	// (controlplane.Lock) already, for longer than the put-back: an
	// upgrade step holds it from its first phase to its end. PutBack then
	// does not take it (a second lock in the same process would be
	// refused as another run's).
	Locked bool
}

// PutBack puts the manifests of req back on node n, one component at a time as Run
// does (the etcd member last, holding the etcd lock, and back only once
// its cluster says so), and waits until each is healthy; a component
// already on its manifest is left alone. There is nothing to roll back to
// when one does not come up: the error (exit code 1) then names it, and
// the node may be down. The node agent puts a node back on its manifests
// from before a rollout with it, when a resumed turn cannot be completed:
// Run's own rollback only knows what the run itself replaced.
func PutBack(ctx context.Context, n Node, req PutBackRequest) ([]controlplane.Outcome, error) {
	if !req.Locked {
		unlock, err := controlplane.Lock(n.ManifestsDir)
		if err != nil {
			return nil, lockError(err)
		}
		defer unlock()
	}
	var components []controlplane.Component
	for _, c := range append(controlplane.Components(), controlplane.Etcd) {
		if _, ok := req.Manifests[c]; ok {
			components = append(components, c)
		}
	}
	plan, err := controlplane.NewPlan(n.ManifestsDir, req.Manifests, components)
	if err != nil {
		return nil, &StageError{Stage: StagePlan, Err: err}
	}
	r := &run{node: n, req: Request{Progress: req.Progress, Wait: req.Wait}}
	opts := controlplane.Options{Node: n.Name, Pods: n.Config, Wait: req.Wait, NoRollback: true, Progress: r.emitApply}
	if i := slices.IndexFunc(plan.Changes, func(ch controlplane.Change) bool { return ch.Component == controlplane.Etcd }); i >= 0 && plan.Changes[i].Changed() {
		guard, err := r.guardPutBack(ctx, plan.Changes[i].Current)
		if err != nil {
			return nil, err
		}
		defer guard.release()
		opts.Before, opts.Ready = guard.confirm, guard.ready
	}
	outcomes, err := controlplane.Apply(ctx, plan, opts)
	if err != nil {
		return outcomes, exitcode.New(exitcode.Failure, err)
	}
	return outcomes, nil
}
