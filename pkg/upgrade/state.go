// Package upgrade is the Kubernetes upgrade state machine: the cluster-wide
// state, per-host statuses, the plan whose rules say how they may move, the
// runners of steps, and their encoding as annotations on a ConfigMap, where
// every node and every tool can read them. It holds no client: callers apply
// its operations inside a compare-and-swap write, so a rule is checked
// against the state actually replaced.
package upgrade

import "strings"

// State is the cluster-wide upgrade state.
type State string

// The states of the built-in plans that are named in code: the start, the
// end, the abort branch, and the steps of the default (starlingx) plan.
// Each in-progress step has a -failed state.
const (
	Started                     State = "upgrade-started"
	DownloadingImages           State = "downloading-images"
	DownloadingImagesFailed     State = "downloading-images-failed"
	DownloadedImages            State = "downloaded-images"
	PreUpdatingApps             State = "pre-updating-apps"
	PreUpdatingAppsFailed       State = "pre-updating-apps-failed"
	PreUpdatedApps              State = "pre-updated-apps"
	UpgradingNetworking         State = "upgrading-networking"
	UpgradingNetworkingFailed   State = "upgrading-networking-failed"
	UpgradedNetworking          State = "upgraded-networking"
	UpgradingStorage            State = "upgrading-storage"
	UpgradingStorageFailed      State = "upgrading-storage-failed"
	UpgradedStorage             State = "upgraded-storage"
	CordonStarted               State = "cordon-started"
	CordonFailed                State = "cordon-failed"
	CordonComplete              State = "cordon-complete"
	UpgradingFirstMaster        State = "upgrading-first-master"
	UpgradingFirstMasterFailed  State = "upgrading-first-master-failed"
	UpgradedFirstMaster         State = "upgraded-first-master"
	UpgradingSecondMaster       State = "upgrading-second-master"
	UpgradingSecondMasterFailed State = "upgrading-second-master-failed"
	UpgradedSecondMaster        State = "upgraded-second-master"
	UpgradingKubelets           State = "upgrading-kubelets"
	UpgradingKubeletsFailed     State = "upgrading-kubelets-failed"
	UncordonStarted             State = "uncordon-started"
	UncordonFailed              State = "uncordon-failed"
	UncordonComplete            State = "uncordon-complete"
	Complete                    State = "upgrade-complete"
	PostUpdatingApps            State = "post-updating-apps"
	PostUpdatingAppsFailed      State = "post-updating-apps-failed"
	PostUpdatedApps             State = "post-updated-apps"
	Aborting                    State = "upgrade-aborting"
	AbortingFailed              State = "upgrade-aborting-failed"
	Aborted                     State = "upgrade-aborted"
)

// HostStatus is one node's upgrade status.
type HostStatus string

// The host statuses of the default plan. None removes the host's entry.
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

// join lists state or status names for messages.
func join[T ~string](names []T) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
