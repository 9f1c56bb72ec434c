package reconfigure

import "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"

// run is one Run's state.
type run struct {
	req        Request
	components []controlplane.Component
	// etcdDiffers: the node's etcd does not run the configuration, or
	// could not be compared (an EtcdError warning says which): the run is
	// not recorded as the node's last known good.
	etcdDiffers bool
}

// allComponents reports whether every component is reconfigured, which a
// last known good needs: it stands for the whole control plane.
func (r *run) allComponents() bool {
	return len(r.components) == len(controlplane.Components())
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
