package reconfigure

import "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"

// EventKind says what an Event reports.
type EventKind string

// The events of a run, in the order they happen.
const (
	// EventWarning: the run goes past something it could not check;
	// Message says what. Unlike Report.Warnings, it is only reported as
	// it happens.
	EventWarning EventKind = "warning"
	// EventRendering: kubeadm is about to render the manifests; Message
	// names the node, its values, kubeadm and the document.
	EventRendering EventKind = "rendering"
	// EventComponent: one of controlplane.Apply's events, in Component.
	EventComponent EventKind = "component"
	// EventEtcd: a step of the guards around the change of the node's
	// etcd member (the lock, the checks, the snapshot, the wait for the
	// member to be back); Message says which.
	EventEtcd EventKind = "etcd"
)

// Event is one step of a run, for progress output: a person watching the
// verb, or the agent's log.
type Event struct {
	Kind    EventKind
	Message string
	// Component is Apply's event, for EventComponent.
	Component controlplane.Event
}
