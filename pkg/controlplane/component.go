// Package controlplane carries a ClusterConfiguration to one node's
// control-plane static Pods: it renders their manifests with the real
// kubeadm, compares them with the running ones, replaces what changed one
// component at a time, waits until the kubelet runs each new manifest and it
// is healthy, and puts the previous manifests back when one is not.
//
// The name is kubeadm's: `kubeadm init phase control-plane` writes these
// manifests, and this package owns nothing but them. It never talks to the
// kubelet; it sees what the kubelet does through the manifests directory,
// the mirror Pods in the API and each manifest's own probe. It prints
// nothing: progress goes to a callback, outcomes are returned as values and
// typed errors (exit codes 8 and 9).
package controlplane

import (
	"fmt"
	"slices"
	"strings"
)

// Component is a control-plane component, by the name kubeadm's
// control-plane phase gives it.
type Component string

// The components, in the order a reconfiguration goes through them: the
// API server first, since the others talk to it.
const (
	APIServer         Component = "apiserver"
	ControllerManager Component = "controller-manager"
	Scheduler         Component = "scheduler"
)

// Etcd is a node's local etcd member of a stacked control plane, by the
// name of kubeadm's phase `kubeadm init phase etcd local`. It is not one of
// Components, which every control-plane node has: only a node with a local
// member has it, and it goes last, on its own, once the others are healthy
// (ParseComponents puts it there). Its manifest is rendered as kubeadm
// renders a first member; KeepInitialCluster gives it the running member's
// initial cluster.
const Etcd Component = "etcd"

// Components returns the components every control-plane node has, in
// order; a node with a local etcd member has Etcd too, after them.
func Components() []Component { return []Component{APIServer, ControllerManager, Scheduler} }

// PodName is the static Pod's name, and its manifest's file name without
// ".yaml": kube-apiserver, kube-controller-manager, kube-scheduler, etcd.
func (c Component) PodName() string {
	if c == Etcd {
		return "etcd"
	}
	return "kube-" + string(c)
}

// phase is the kubeadm command that renders the component's manifest.
func (c Component) phase() []string {
	if c == Etcd {
		return []string{"init", "phase", "etcd", "local"}
	}
	return []string{"init", "phase", "control-plane", string(c)}
}

// File is the manifest's file name in the manifests directory.
func (c Component) File() string { return c.PodName() + ".yaml" }

// ParseComponents reads component names (apiserver, controller-manager,
// scheduler, etcd, or their Pod names) and returns them once each, in the
// order they are reconfigured: etcd last.
func ParseComponents(names []string) ([]Component, error) {
	order := append(Components(), Etcd)
	seen := map[Component]bool{}
	for _, n := range names {
		c := Component(strings.TrimPrefix(strings.TrimSpace(n), "kube-"))
		if !slices.Contains(order, c) {
			return nil, fmt.Errorf("unknown component %q (want apiserver, controller-manager, scheduler or etcd)", n)
		}
		seen[c] = true
	}
	var out []Component
	for _, c := range order {
		if seen[c] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no component given (want apiserver, controller-manager, scheduler or etcd)")
	}
	return out, nil
}
