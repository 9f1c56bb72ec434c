package reconfigure

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The node's local etcd member is one of the run's components on a node of
// a stacked control plane: rendered by kubeadm as the others
// (`kubeadm init phase etcd local`), planned with the running member's
// initial cluster (controlplane.KeepInitialCluster), and changed last, on
// its own, once every other component is healthy on its new manifest, with
// the guards of etcdGuard around it. An external etcd, or a node that runs
// no member, is left alone, and the report says so.

// EtcdReport is what a run did with the node's local etcd member.
type EtcdReport struct {
	// LeftAlone says why etcd is not part of the run, "" when it is (or
	// was not asked for): the ClusterConfiguration's etcd is external, or
	// the node runs no local member.
	LeftAlone string
	// Member names the member changed, as the checks before the change
	// saw it (name, ID and endpoint); "" when it was not changed.
	Member string
	// Snapshot is the etcd snapshot taken before the member was changed;
	// "" when none was.
	Snapshot string
}

// considerEtcd decides whether the node's etcd member is one of the run's
// components: it is asked for (no Components, or Etcd among them), the
// ClusterConfiguration's etcd is local, and the node runs a member (an etcd
// manifest in the manifests directory). It returns the running manifest
// when it is, and sets r.components, r.etcdLocal and the report's
// LeftAlone.
func (r *run) considerEtcd(src *source, rep *EtcdReport) (*controlplane.Manifest, error) {
	var running *controlplane.Manifest
	if !src.doc.ExternalEtcd() {
		m, err := controlplane.ReadEtcd(r.node.ManifestsDir)
		if err != nil {
			return nil, &StageError{Stage: StagePlan, Err: err}
		}
		running = m
	}
	r.etcdLocal = running != nil
	if len(r.req.Components) > 0 && !slices.Contains(r.req.Components, controlplane.Etcd) {
		return nil, nil
	}
	r.components = slices.DeleteFunc(r.components, func(c controlplane.Component) bool { return c == controlplane.Etcd })
	switch {
	case src.doc.ExternalEtcd():
		rep.LeftAlone = "etcd is external (etcd.external)"
		return nil, nil
	case running == nil:
		rep.LeftAlone = fmt.Sprintf("no local etcd member on this node (no %s)", filepath.Join(r.node.ManifestsDir, controlplane.Etcd.File()))
		return nil, nil
	}
	r.components = append(r.components, controlplane.Etcd)
	return running, nil
}

// keepInitialCluster gives the rendered etcd manifest the running member's
// initial cluster, in place in rendered.
func keepInitialCluster(running *controlplane.Manifest, rendered map[controlplane.Component][]byte) error {
	if running == nil {
		return nil
	}
	m, err := controlplane.ParseManifest(rendered[controlplane.Etcd])
	if err != nil {
		return &StageError{Stage: StageRender, Err: exitcode.Failuref("kubeadm's etcd manifest: %w", err)}
	}
	kept, err := controlplane.KeepInitialCluster(running, m)
	if err != nil {
		return &StageError{Stage: StageRender, Err: exitcode.New(exitcode.Failure, err)}
	}
	rendered[controlplane.Etcd] = kept.Raw
	return nil
}

// etcdChange is the plan's change of the etcd member, nil when it has none
// or it is the same.
func etcdChange(plan *controlplane.Plan) *controlplane.Change {
	for i, ch := range plan.Changes {
		if ch.Component == controlplane.Etcd && ch.Changed() {
			return &plan.Changes[i]
		}
	}
	return nil
}
