package upgrade

import (
	"maps"
	"slices"
)

// Where an upgrade stands on a failure. A step fails in two ways: the
// upgrade moves to the step's -failed state, or, in a step whose work is
// done per host (the kubelets), one host moves to its host step's failed
// status while the upgrade stays in the step's in-progress state. Whoever
// asks whether an upgrade failed (the agents' metrics, a wait for its end,
// upgrade-resume) asks here, so that neither way is forgotten.

// HostFailed reports whether s is the failed status of one of the plan's
// host steps.
func (p *Plan) HostFailed(s HostStatus) bool {
	h := p.hostStep(s)
	return h != nil && h.Failed == s
}

// HostStepOf returns the host step s belongs to (its in-progress, failed
// or reached status), or nil.
func (p *Plan) HostStepOf(s HostStatus) *HostStep {
	if h := p.hostStep(s); h != nil {
		hs := *h
		return &hs
	}
	return nil
}

// FailedHost is the node whose host status is failed, the first in the
// plan's order of its work nodes, then the others by name; "" when no
// host failed.
func (r *Record) FailedHost() string {
	p := r.plan()
	order := p.WorkNodes()
	for _, n := range slices.Sorted(maps.Keys(r.Hosts)) {
		if !slices.Contains(order, n) {
			order = append(order, n)
		}
	}
	for _, n := range order {
		if h, ok := r.Hosts[n]; ok && p.HostFailed(h.Status) {
			return n
		}
	}
	return ""
}

// Phase says where the upgrade stands, for monitoring: the phase of its
// state (Plan.Phase), except that an upgrade not over with a host in a
// failed status has a failed step, although its state is the step's
// in-progress one.
func (r *Record) Phase() Phase {
	p := r.plan()
	if !p.Over(r.State) && r.FailedHost() != "" {
		return PhaseStepFailed
	}
	return p.Phase(r.State)
}
