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
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Run reconfigures node n as req asks. Before anything changes it takes the manifests
// directory's lock (not on a dry run), reads the document, checks that no
// upgrade is in progress (StageUpgrade), renders, plans, and checks that
// the plan changes no versions (StageVersion); an error there is returned
// with a nil Report, and nothing was changed. The node's local etcd member
// is a component too, planned with its running initial cluster and changed
// last, on its own: when it changes, the cluster-wide etcd lock is taken,
// the cluster checked and a snapshot taken before anything changes
// (StageEtcd, exit 4 when refused), the cluster checked again right before
// the member's manifest is replaced, and the member is back only once its
// cluster says so and this node's API server is ready. Once the plan is
// applied, a failure comes back with the Report of what was done:
// controlplane's errors, exit code 8 when the node is back on its previous
// manifests, 9 when the rollback failed too.
func Run(ctx context.Context, n Node, req Request) (*Report, error) {
	r := &run{node: n, req: req, components: req.Components}
	if len(r.components) == 0 {
		r.components = controlplane.Components()
	}
	r.components = slices.Clone(r.components)
	if err := r.checkWait(); err != nil {
		return nil, err
	}
	if !req.DryRun {
		unlock, err := controlplane.Lock(n.ManifestsDir)
		if err != nil {
			return nil, lockError(err)
		}
		defer unlock()
	}
	src, err := r.source(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.checkUpgrade(ctx, src); err != nil {
		return nil, err
	}
	node, err := controlplane.Discover(n.ManifestsDir, n.NodeConfig)
	if err != nil {
		return nil, &StageError{Stage: StageDiscover, Err: exitcode.New(exitcode.Failure, err)}
	}
	file, err := clusterconfig.ConfigFile(src.document, src.apiVersion, node)
	if err != nil {
		return nil, exitcode.Failuref("build this node's kubeadm config file: %w", err)
	}
	renderer := controlplane.Renderer{Kubeadm: n.Kubeadm}
	if err := r.checkKubeadm(ctx, renderer, src); err != nil {
		return nil, err
	}
	var etcdRep EtcdReport
	runningEtcd, err := r.considerEtcd(src, &etcdRep)
	if err != nil {
		return nil, err
	}
	r.emit(Event{Kind: EventRendering, Message: fmt.Sprintf("rendering the manifests of node %s (advertise address %s, port %d) with %s from %s",
		node.Name, node.AdvertiseAddress, node.BindPort, n.Kubeadm, src.label)})
	rendered, err := renderer.Render(ctx, file, r.components)
	if err != nil {
		return nil, &StageError{Stage: StageRender, Err: exitcode.New(exitcode.Failure, err)}
	}
	if err := keepInitialCluster(runningEtcd, rendered); err != nil {
		return nil, err
	}
	plan, err := controlplane.NewPlan(n.ManifestsDir, rendered, r.components)
	if err != nil {
		return nil, &StageError{Stage: StagePlan, Err: err}
	}
	if err := r.checkVersions(plan); err != nil {
		return nil, err
	}
	rep := &Report{Node: node.Name, Source: src.label, DryRun: req.DryRun, Plan: plan, Etcd: etcdRep}
	if src.backup != nil {
		rep.Backup = src.backup.Name
	}
	if req.DryRun {
		return rep, nil
	}
	opts := controlplane.Options{Node: node.Name, Pods: n.Config, Wait: req.Wait, NoRollback: req.NoRollback, Progress: r.emitApply}
	if !plan.Changed() {
		if err := r.begin(plan, ""); err != nil {
			return nil, err
		}
		if err := r.markHealthy(ctx, src, plan, opts, rep); err != nil {
			return nil, err
		}
		return rep, nil
	}
	if ch := etcdChange(plan); ch != nil {
		guard, err := r.guardEtcd(ctx, src, node.Name, ch.Current, &rep.Etcd)
		if err != nil {
			return nil, err
		}
		defer guard.release()
		opts.Before, opts.Ready = guard.before, guard.ready
	}
	applied, err := r.appliedBackup(src)
	if err != nil {
		return nil, err
	}
	rep.Backup = applied.Name
	if err := r.begin(plan, applied.Name); err != nil {
		return nil, err
	}
	opts.Backup = &manifestBackups{store: n.Store, config: applied.Name, node: node.Name}
	rep.Outcomes, err = controlplane.Apply(ctx, plan, opts)
	if err != nil {
		return rep, err
	}
	r.markLastGood(applied, rep)
	return rep, nil
}
