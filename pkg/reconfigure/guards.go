package reconfigure

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// The preconditions of a run, checked before anything changes: a
// reconfiguration changes a node's configuration, and leaves its versions,
// and a node an upgrade is working on, to the upgrade.

// checkWait refuses a wait under controlplane.MinWait: a healthy change
// could not be confirmed, and would be rolled back.
func (r *run) checkWait() error {
	if r.req.DryRun || r.req.Wait >= controlplane.MinWait {
		return nil
	}
	return exitcode.Usagef("a wait of %s per component is under the %s minimum: a restarting kube-apiserver may take the kubelet's 30s grace period just to stop",
		r.req.Wait, controlplane.MinWait)
}

// checkUpgrade refuses to run while the upgrade record says an upgrade is
// in progress. No record ConfigMap, or none in it, is no upgrade. When the
// API cannot be reached and the document comes from a backup (going back
// while the API is down, often), the run goes on with a warning, as
// fromBackup does.
func (r *run) checkUpgrade(ctx context.Context, src *source) error {
	if r.req.AllowDuringUpgrade {
		return nil
	}
	name := r.node.UpgradeConfigMap
	if name == "" {
		name = upgrade.DefaultConfigMap
	}
	where := r.node.Config.Target().Namespace + "/" + name
	cm, err := r.node.Config.ConfigMap(ctx, name)
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrUnreachable) && src.backup != nil:
		r.emit(Event{Kind: EventWarning, Message: fmt.Sprintf("cannot read the upgrade record in configmap %s (%s); applying the backup anyway",
			where, exitcode.Message(err))})
		return nil
	default:
		return &StageError{Stage: StageUpgrade, Err: err}
	}
	if cm == nil {
		return nil
	}
	rec, ok, err := upgrade.FromConfigMap(cm)
	if err != nil {
		return &StageError{Stage: StageUpgrade, Err: exitcode.New(exitcode.FromError(err),
			fmt.Errorf("the upgrade record in configmap %s cannot be read: %w", where, err))}
	}
	if !ok || !UpgradeInProgress(rec) {
		return nil
	}
	return &StageError{Stage: StageUpgrade, Err: exitcode.New(exitcode.Conflict,
		&UpgradeInProgressError{ConfigMap: where, State: rec.State, From: rec.FromVersion, To: rec.ToVersion})}
}

// UpgradeInProgress reports whether an upgrade is under way in rec's state,
// under its own plan: from its start until its complete state, a step done
// or failed and the abort branch included. Once complete (the steps after
// it too, which no longer touch the control plane) or aborted, it is not. A
// state the plan does not know counts as under way. A reconfiguration is
// refused while it is; the node agent's condition gives no verdict on a
// node that differs then (nodestate.ReasonUpgradeInProgress).
func UpgradeInProgress(rec *upgrade.Record) bool {
	p := rec.PlanOf()
	if p.Over(rec.State) {
		return false
	}
	step, steps := p.Position(rec.State)
	return step <= steps
}

// checkKubeadm reads kubeadm's release and refuses one of another minor
// release than kubernetesVersion, before it renders anything.
func (r *run) checkKubeadm(ctx context.Context, renderer controlplane.Renderer, src *source) error {
	v, err := renderer.Version(ctx)
	if err != nil {
		return &StageError{Stage: StageRender, Err: exitcode.New(exitcode.Failure, err)}
	}
	if r.req.AllowVersionChange {
		return nil
	}
	err = controlplane.CheckKubeadmRelease(v, src.doc.KubernetesVersion())
	var release *controlplane.KubeadmReleaseError
	switch {
	case errors.As(err, &release):
		return &StageError{Stage: StageVersion, Err: exitcode.New(exitcode.Conflict, err)}
	case err != nil:
		return &StageError{Stage: StageRender, Err: exitcode.New(exitcode.Failure, err)}
	}
	return nil
}

// checkVersions refuses a plan that changes a component's image tag.
func (r *run) checkVersions(plan *controlplane.Plan) error {
	if r.req.AllowVersionChange || r.req.AllowImageChange {
		return nil
	}
	if changes := plan.ImageChanges(); len(changes) > 0 {
		return &StageError{Stage: StageVersion, Err: exitcode.New(exitcode.Conflict, &controlplane.VersionChangeError{Changes: changes})}
	}
	return nil
}
