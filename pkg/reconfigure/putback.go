package reconfigure

import (
	"context"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// PutBackRequest puts a node's components back on manifests they ran
// before: the manifest backups a reconfiguration kept.
type PutBackRequest struct {
	// Pods reads the node's mirror Pods (an engine.Engine).
	Pods controlplane.Pods
	// Node names the mirror Pods.
	Node         string
	ManifestsDir string
	// Manifests are the manifests to put back, by component; a component
	// left out is not touched.
	Manifests map[controlplane.Component][]byte
	// Wait is how long each component may take to come up healthy.
	Wait     time.Duration
	Progress func(Event)
}

// PutBack puts the manifests of req back, one component at a time as Run
// does, and waits until each is healthy; a component already on its
// manifest is left alone. There is nothing to roll back to when one does
// not come up: the error (exit code 1) then names it, and the node may be
// down. The node agent puts a node back on its manifests from before a
// rollout with it, when a resumed turn cannot be completed: Run's own
// rollback only knows what the run itself replaced.
func PutBack(ctx context.Context, req PutBackRequest) ([]controlplane.Outcome, error) {
	unlock, err := controlplane.Lock(req.ManifestsDir)
	if err != nil {
		return nil, lockError(err)
	}
	defer unlock()
	var components []controlplane.Component
	for _, c := range controlplane.Components() {
		if _, ok := req.Manifests[c]; ok {
			components = append(components, c)
		}
	}
	plan, err := controlplane.NewPlan(req.ManifestsDir, req.Manifests, components)
	if err != nil {
		return nil, &StageError{Stage: StagePlan, Err: err}
	}
	r := &run{req: Request{Progress: req.Progress}}
	outcomes, err := controlplane.Apply(ctx, plan, controlplane.Options{Node: req.Node, Pods: req.Pods, Wait: req.Wait,
		NoRollback: true, Progress: r.emitApply})
	if err != nil {
		return outcomes, exitcode.New(exitcode.Failure, err)
	}
	return outcomes, nil
}
