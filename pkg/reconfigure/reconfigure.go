// Package reconfigure applies a ClusterConfiguration to one node's
// control-plane static Pods, start to finish: it chooses the document (the
// live one, a backup, the node's last known good, or one given pinned),
// finds the node's own values, builds its kubeadm config file, has kubeadm
// render the manifests, plans what changes, applies it one component at a
// time with a health check and a rollback, keeps the manifests it replaces,
// and records the node's last known good.
//
// It drives the domain packages that do each part: pkg/engine reads the
// kubeadm-config ConfigMap and the mirror Pods, pkg/clusterconfig builds the
// config file, pkg/controlplane renders, plans, locks and applies, and
// pkg/backup keeps the ClusterConfiguration backups, the manifest backups
// and the last known good records. The reconfigure verb and the agent run
// the same Run, in process. Like every domain package it prints nothing and
// names no flag: progress goes to a callback, warnings and outcomes come
// back in the Report, and failures are typed errors (StageError) so that a
// caller can say which setting to check.
package reconfigure

import (
	"context"
	"fmt"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Request is one reconfiguration of a node.
type Request struct {
	// Config reads the kubeadm-config ConfigMap (its Target names the
	// namespace, the ConfigMap and the key) and the node's mirror Pods.
	Config *engine.Engine
	// Store keeps the ClusterConfiguration backup a run applies, the
	// manifests it replaces and the node's last known good. Keep bounds
	// the backups of the ConfigMap; Server is recorded in them.
	Store  *backup.Store
	Keep   int
	Server string
	// Source chooses the ClusterConfiguration; the zero Source is the live
	// one.
	Source Source
	// Node holds the node's own values. Name is required: it names the
	// mirror Pods and the last known good (controlplane.NodeName reads the
	// hostname). An empty AdvertiseAddress or BindPort is read from the
	// node's kube-apiserver manifest; PatchesDir holds kubeadm patches.
	Node clusterconfig.NodeConfig
	// ManifestsDir is the kubelet's static Pod manifests directory.
	ManifestsDir string
	// Kubeadm is the kubeadm binary that renders the manifests.
	Kubeadm string
	// Components are reconfigured in controlplane.Components' order; nil
	// is every one. Only a run over every component is recorded as the
	// node's last known good.
	Components []controlplane.Component
	// Wait is how long each changed component may take to come up
	// healthy before the rollback.
	Wait time.Duration
	// NoRollback leaves a component that does not come up as it is.
	NoRollback bool
	// DryRun stops after the plan: nothing is locked, backed up or changed.
	DryRun bool
	// Progress receives what the run does, as it does it; nil discards it.
	Progress func(Event)
}

// Report is what a run did.
type Report struct {
	// Node is the node's name.
	Node string
	// Source says in words which ClusterConfiguration was applied.
	Source string
	// Backup is the ClusterConfiguration backup the run applied: the one
	// it came from, or a backup of the live document taken for the run.
	Backup string
	DryRun bool
	// Plan is every component considered, changed or not, in order.
	Plan *controlplane.Plan
	// Outcomes is what Apply did to each of Plan's components; nil when
	// nothing had to change.
	Outcomes []controlplane.Outcome
	// LastKnownGood is the backup now recorded as the node's last known
	// good, "" when none was recorded (Warnings says why).
	LastKnownGood string
	// Warnings are what the run went past without failing. They are errors
	// so that a caller can tell them apart (errors.As) and add what would
	// fix them: a StageError, a PartialError, or a wrapped cause.
	Warnings []error
}

// Run reconfigures the node. Before anything changes it takes the manifests
// directory's lock (not on a dry run), reads the document, renders and
// plans; an error there is returned with a nil Report, and nothing was
// changed. Once the plan is applied, a failure comes back with the Report of
// what was done: controlplane's errors, exit code 8 when the node is back on
// its previous manifests, 9 when the rollback failed too.
func Run(ctx context.Context, req Request) (*Report, error) {
	r := &run{req: req, components: req.Components}
	if len(r.components) == 0 {
		r.components = controlplane.Components()
	}
	if !req.DryRun {
		unlock, err := controlplane.Lock(req.ManifestsDir)
		if err != nil {
			return nil, lockError(err)
		}
		defer unlock()
	}
	src, err := r.source(ctx)
	if err != nil {
		return nil, err
	}
	node, err := controlplane.Discover(req.ManifestsDir, req.Node)
	if err != nil {
		return nil, &StageError{Stage: StageDiscover, Err: exitcode.New(exitcode.Failure, err)}
	}
	file, err := clusterconfig.ConfigFile(src.document, src.apiVersion, node)
	if err != nil {
		return nil, exitcode.Failuref("build this node's kubeadm config file: %w", err)
	}
	r.emit(Event{Kind: EventRendering, Message: fmt.Sprintf("rendering the manifests of node %s (advertise address %s, port %d) with %s from %s",
		node.Name, node.AdvertiseAddress, node.BindPort, req.Kubeadm, src.label)})
	rendered, err := controlplane.Renderer{Kubeadm: req.Kubeadm}.Render(ctx, file, r.components)
	if err != nil {
		return nil, &StageError{Stage: StageRender, Err: exitcode.New(exitcode.Failure, err)}
	}
	plan, err := controlplane.NewPlan(req.ManifestsDir, rendered, r.components)
	if err != nil {
		return nil, &StageError{Stage: StagePlan, Err: err}
	}
	rep := &Report{Node: node.Name, Source: src.label, DryRun: req.DryRun, Plan: plan}
	if src.backup != nil {
		rep.Backup = src.backup.Name
	}
	if req.DryRun {
		return rep, nil
	}
	opts := controlplane.Options{Node: node.Name, Pods: req.Config, Wait: req.Wait, NoRollback: req.NoRollback, Progress: r.emitApply}
	if !plan.Changed() {
		if err := r.markHealthy(ctx, src, plan, opts, rep); err != nil {
			return nil, err
		}
		return rep, nil
	}
	applied, err := r.appliedBackup(src)
	if err != nil {
		return nil, err
	}
	rep.Backup = applied.Name
	opts.Backup = &manifestBackups{store: req.Store, config: applied.Name, node: node.Name}
	rep.Outcomes, err = controlplane.Apply(ctx, plan, opts)
	if err != nil {
		return rep, err
	}
	r.markLastGood(applied, rep)
	return rep, nil
}

// run is one Run's state.
type run struct {
	req        Request
	components []controlplane.Component
}

// allComponents reports whether every component is reconfigured, which a
// last known good needs: it stands for the whole control plane.
func (r *run) allComponents() bool {
	return len(r.components) == len(controlplane.Components())
}
