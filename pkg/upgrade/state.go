// Package upgrade is the Kubernetes upgrade state machine: the cluster-wide
// state, per-host statuses, the rules for moving between them, and their
// encoding as annotations on a ConfigMap, where every node and every tool can
// read them. It holds no client: callers apply its operations inside a
// compare-and-swap write, so a rule is checked against the state actually
// replaced.
package upgrade

import (
	"slices"
	"strings"
)

// State is the cluster-wide upgrade state.
type State string

// The upgrade steps, in order. Each in-progress step has a -failed state.
const (
	Started                     State = "upgrade-started"
	DownloadingImages           State = "downloading-images"
	DownloadingImagesFailed     State = "downloading-images-failed"
	DownloadedImages            State = "downloaded-images"
	UpgradingNetworking         State = "upgrading-networking"
	UpgradingNetworkingFailed   State = "upgrading-networking-failed"
	UpgradedNetworking          State = "upgraded-networking"
	UpgradingStorage            State = "upgrading-storage"
	UpgradingStorageFailed      State = "upgrading-storage-failed"
	UpgradedStorage             State = "upgraded-storage"
	UpgradingFirstMaster        State = "upgrading-first-master"
	UpgradingFirstMasterFailed  State = "upgrading-first-master-failed"
	UpgradedFirstMaster         State = "upgraded-first-master"
	UpgradingSecondMaster       State = "upgrading-second-master"
	UpgradingSecondMasterFailed State = "upgrading-second-master-failed"
	UpgradedSecondMaster        State = "upgraded-second-master"
	UpgradingKubelets           State = "upgrading-kubelets"
	UpgradingKubeletsFailed     State = "upgrading-kubelets-failed"
	Complete                    State = "upgrade-complete"
	Aborting                    State = "upgrade-aborting"
	AbortingFailed              State = "upgrade-aborting-failed"
	Aborted                     State = "upgrade-aborted"
)

// step is one stage of the main line: the in-progress state, its failure,
// and the state it reaches.
type step struct {
	from       State // predecessor
	inProgress State
	failed     State
	done       State // "" when the next step follows directly
}

// steps is the main line from upgrade-started to upgrade-complete.
var steps = []step{
	{Started, DownloadingImages, DownloadingImagesFailed, DownloadedImages},
	{DownloadedImages, UpgradingNetworking, UpgradingNetworkingFailed, UpgradedNetworking},
	{UpgradedNetworking, UpgradingStorage, UpgradingStorageFailed, UpgradedStorage},
	{UpgradedStorage, UpgradingFirstMaster, UpgradingFirstMasterFailed, UpgradedFirstMaster},
	{UpgradedFirstMaster, UpgradingSecondMaster, UpgradingSecondMasterFailed, UpgradedSecondMaster},
	{UpgradedSecondMaster, UpgradingKubelets, UpgradingKubeletsFailed, Complete},
}

// States lists every state, in the order of the state diagram.
func States() []State {
	out := []State{Started}
	for _, s := range steps {
		out = append(out, s.inProgress, s.failed)
		if s.done != Complete {
			out = append(out, s.done)
		}
	}
	return append(out, Complete, Aborting, AbortingFailed, Aborted)
}

// Known reports whether s is a state name.
func Known(s State) bool { return slices.Contains(States(), s) }

// Terminal reports whether an upgrade in s is over.
func Terminal(s State) bool { return s == Complete || s == Aborted }

// InProgress reports whether s is a step under way, which can fail.
func InProgress(s State) bool { _, ok := FailedOf(s); return ok }

// Failed reports whether s is a failed step.
func Failed(s State) bool { return strings.HasSuffix(string(s), "-failed") && Known(s) }

// FailedOf returns the failed state of an in-progress state.
func FailedOf(s State) (State, bool) {
	if s == Aborting {
		return AbortingFailed, true
	}
	for _, st := range steps {
		if st.inProgress == s {
			return st.failed, true
		}
	}
	return "", false
}

// Allowed returns the states reachable from s in one transition.
func Allowed(from State) []State {
	var out []State
	for _, to := range States() {
		if allowed(from, to) {
			out = append(out, to)
		}
	}
	return out
}

// allowed is the transition rule: each step from its predecessor or from its
// own failed state (a retry); a step's end or failure only from the step;
// aborting from any state that is not over.
func allowed(from, to State) bool {
	switch to {
	case Started:
		return false // only upgrade-start begins an upgrade
	case Aborting:
		return !Terminal(from) && from != Aborting
	case AbortingFailed, Aborted:
		return from == Aborting
	}
	for _, st := range steps {
		switch to {
		case st.inProgress:
			return from == st.from || from == st.failed
		case st.failed, st.done:
			return from == st.inProgress
		}
	}
	return false
}

// HostStatus is one node's upgrade status.
type HostStatus string

// The host statuses. None removes the host's entry.
const (
	HostNone                        HostStatus = "none"
	HostUpgradingControlPlane       HostStatus = "upgrading-control-plane"
	HostUpgradingControlPlaneFailed HostStatus = "upgrading-control-plane-failed"
	HostUpgradedControlPlane        HostStatus = "upgraded-control-plane"
	HostUpgradingKubelet            HostStatus = "upgrading-kubelet"
	HostUpgradingKubeletFailed      HostStatus = "upgrading-kubelet-failed"
	HostUpgradedKubelet             HostStatus = "upgraded-kubelet"
	HostUpgradingEtcd               HostStatus = "upgrading-etcd"
	HostUpgradingEtcdFailed         HostStatus = "upgrading-etcd-failed"
	HostUpgradedEtcd                HostStatus = "upgraded-etcd"
)

// hostSteps are the per-host steps: in progress, failed, done.
var hostSteps = [][3]HostStatus{
	{HostUpgradingControlPlane, HostUpgradingControlPlaneFailed, HostUpgradedControlPlane},
	{HostUpgradingKubelet, HostUpgradingKubeletFailed, HostUpgradedKubelet},
	{HostUpgradingEtcd, HostUpgradingEtcdFailed, HostUpgradedEtcd},
}

// HostStatuses lists every host status, "none" first.
func HostStatuses() []HostStatus {
	out := []HostStatus{HostNone}
	for _, s := range hostSteps {
		out = append(out, s[0], s[1], s[2])
	}
	return out
}

// KnownHost reports whether s is a host status name.
func KnownHost(s HostStatus) bool { return slices.Contains(HostStatuses(), s) }

// HostFailedOf returns the failed status of an in-progress host status.
func HostFailedOf(s HostStatus) (HostStatus, bool) {
	for _, st := range hostSteps {
		if st[0] == s {
			return st[1], true
		}
	}
	return "", false
}

// AllowedHost returns the host statuses reachable from s.
func AllowedHost(from HostStatus) []HostStatus {
	var out []HostStatus
	for _, to := range HostStatuses() {
		if allowedHost(from, to) {
			out = append(out, to)
		}
	}
	return out
}

// allowedHost: a step starts from no status, from a finished step, or from
// its own failure (a retry); it ends or fails only from itself; the status
// is cleared from anything not under way.
func allowedHost(from, to HostStatus) bool {
	_, fromInProgress := HostFailedOf(from)
	if to == HostNone {
		return from != HostNone && !fromInProgress
	}
	for _, st := range hostSteps {
		switch to {
		case st[0]:
			return from == HostNone || from == st[1] || from == HostUpgradedControlPlane ||
				from == HostUpgradedKubelet || from == HostUpgradedEtcd
		case st[1], st[2]:
			return from == st[0]
		}
	}
	return false
}
