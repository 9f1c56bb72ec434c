package reconfigure

import (
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
)

// run is one Run's state.
type run struct {
	node       Node
	req        Request
	components []controlplane.Component
	// etcdLocal: the node runs a local etcd member of the
	// ClusterConfiguration's (local) etcd, asked for or not
	// (considerEtcd).
	etcdLocal bool
}

// allComponents reports whether every component is reconfigured, which a
// last known good needs: it stands for the whole control plane, the
// node's etcd member included when it has one.
func (r *run) allComponents() bool {
	for _, c := range controlplane.Components() {
		if !slices.Contains(r.components, c) {
			return false
		}
	}
	return !r.etcdLocal || slices.Contains(r.components, controlplane.Etcd)
}

func (r *run) emit(e Event) {
	if r.req.Progress != nil {
		r.req.Progress(e)
	}
}

func (r *run) emitApply(e controlplane.Event) {
	r.emit(Event{Kind: EventComponent, Component: e})
}

// begin calls Request.Begin with the components plan changes.
func (r *run) begin(plan *controlplane.Plan, backup string) error {
	if r.req.Begin == nil {
		return nil
	}
	var changed []string
	for _, ch := range plan.Changes {
		if ch.Changed() {
			changed = append(changed, ch.Component.PodName())
		}
	}
	return r.req.Begin(changed, backup)
}
