package nodestate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

func TestOutOfDate(t *testing.T) {
	live, older := "sha256:"+strings.Repeat("2", 64), "sha256:"+strings.Repeat("1", 64)
	inSync := &State{InSync: true, LiveHash: live, LiveResourceVersion: "406"}
	differs := &State{Differs: []string{"kube-apiserver"}, LiveHash: live, LiveResourceVersion: "406"}
	twoDiffer := &State{Differs: []string{"kube-apiserver", "etcd"}, LiveHash: live, LiveResourceVersion: "406"}
	cannot := &State{Error: "kubeadm failed: exit status 1", LiveHash: live, LiveResourceVersion: "406"}
	noConfig := &State{Error: "configmap kube-system/kubeadm-config was not found"}
	rolloutOf := func(target string, phase rollout.NodePhase, message string) *rollout.Status {
		return &rollout.Status{ID: 2, Kind: rollout.KindRollout, Phase: rollout.Failed, Target: rollout.Ref{Hash: target},
			Nodes: []rollout.Node{{Name: "cp-0", Phase: phase, Message: message}, {Name: "cp-1", Phase: rollout.NodePending}}}
	}
	rolledBack := rolloutOf(live, rollout.NodeRolledBack, "kube-apiserver keeps exiting")
	rollbackFailed := rolloutOf(live, rollout.NodeRollbackFailed, "kube-apiserver did not come back")
	for _, tc := range []struct {
		name string
		node string
		st   *State
		last *rollout.Status
		want Condition
	}{
		{"in sync", "cp-0", inSync, nil,
			Condition{corev1.ConditionFalse, ReasonInSync, "node cp-0 runs the live kubeadm-config document (resourceVersion 406)"}},
		{"a component differs", "cp-0", differs, nil,
			Condition{corev1.ConditionTrue, ReasonComponentsDiffer,
				"the control plane of node cp-0 does not run the live kubeadm-config document (resourceVersion 406): kube-apiserver differs"}},
		{"two components differ", "cp-0", twoDiffer, nil,
			Condition{corev1.ConditionTrue, ReasonComponentsDiffer,
				"the control plane of node cp-0 does not run the live kubeadm-config document (resourceVersion 406): kube-apiserver, etcd differ"}},
		{"the agent cannot tell", "cp-0", cannot, nil,
			Condition{corev1.ConditionUnknown, ReasonStateUnknown,
				"the agent cannot tell whether node cp-0 runs the live kubeadm-config document (resourceVersion 406): kubeadm failed: exit status 1"}},
		{"kubeadm-config cannot be read", "cp-0", noConfig, nil,
			Condition{corev1.ConditionUnknown, ReasonStateUnknown,
				"the agent cannot tell whether node cp-0 runs the live kubeadm-config document: configmap kube-system/kubeadm-config was not found"}},
		{"not looked yet", "cp-0", nil, nil,
			Condition{corev1.ConditionUnknown, ReasonStateUnknown,
				"the agent cannot tell whether node cp-0 runs the live kubeadm-config document: its agent has not looked yet"}},
		{"its turn of the live document was rolled back", "cp-0", differs, rolledBack,
			Condition{corev1.ConditionTrue, ReasonTurnRolledBack,
				"node cp-0's turn in rollout 2 of the live kubeadm-config document (resourceVersion 406) failed and was rolled back (kube-apiserver keeps exiting): kube-apiserver differs"}},
		{"rolled back, and the state cannot be found", "cp-0", cannot, rolledBack,
			Condition{corev1.ConditionTrue, ReasonTurnRolledBack,
				"node cp-0's turn in rollout 2 of the live kubeadm-config document (resourceVersion 406) failed and was rolled back (kube-apiserver keeps exiting)"}},
		{"rolled back in a rollout of a document no longer live", "cp-0", differs, rolloutOf(older, rollout.NodeRolledBack, "x"),
			Condition{corev1.ConditionTrue, ReasonComponentsDiffer,
				"the control plane of node cp-0 does not run the live kubeadm-config document (resourceVersion 406): kube-apiserver differs"}},
		{"rolled back, then the document put back: in sync", "cp-0", inSync, rolloutOf(older, rollout.NodeRolledBack, "x"),
			Condition{corev1.ConditionFalse, ReasonInSync, "node cp-0 runs the live kubeadm-config document (resourceVersion 406)"}},
		{"the rollback failed", "cp-0", differs, rollbackFailed,
			Condition{corev1.ConditionTrue, ReasonRollbackFailed,
				"node cp-0's turn in rollout 2 failed and so did its rollback (kube-apiserver did not come back): a component may be down: kube-apiserver differs"}},
		{"the rollback failed in a rollout of another document", "cp-0", cannot, rolloutOf(older, rollout.NodeRollbackFailed, "etcd is down"),
			Condition{corev1.ConditionTrue, ReasonRollbackFailed,
				"node cp-0's turn in rollout 2 failed and so did its rollback (etcd is down): a component may be down"}},
		{"another node's turn failed", "cp-1", differs, rolledBack,
			Condition{corev1.ConditionTrue, ReasonComponentsDiffer,
				"the control plane of node cp-1 does not run the live kubeadm-config document (resourceVersion 406): kube-apiserver differs"}},
		{"a node the rollout does not name", "cp-9", inSync, rolledBack,
			Condition{corev1.ConditionFalse, ReasonInSync, "node cp-9 runs the live kubeadm-config document (resourceVersion 406)"}},
		{"updated", "cp-0", inSync, rolloutOf(live, rollout.NodeUpdated, ""),
			Condition{corev1.ConditionFalse, ReasonInSync, "node cp-0 runs the live kubeadm-config document (resourceVersion 406)"}},
		{"an undo's turn rolled back", "cp-0", differs, &rollout.Status{ID: 3, Kind: rollout.KindUndo, Target: rollout.Ref{Hash: live},
			Nodes: []rollout.Node{{Name: "cp-0", Phase: rollout.NodeRolledBack, Message: "etcd unhealthy"}}},
			Condition{corev1.ConditionTrue, ReasonTurnRolledBack,
				"node cp-0's turn in undo 3 of the live kubeadm-config document (resourceVersion 406) failed and was rolled back (etcd unhealthy): kube-apiserver differs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, OutOfDate(tc.node, tc.st, tc.last, nil)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// Review A4: once the first node of an upgrade has written the target
// release into kubeadm-config, every node not yet upgraded renders
// differently until its own step. While the upgrade record says an upgrade
// is in progress, that is no verdict (Unknown, UpgradeInProgress, so no
// Warning Event and no alert); a node in sync is still in sync, a failed
// rollback still out of date, and a node whose state cannot be found
// still says why.
func TestOutOfDateDuringAnUpgrade(t *testing.T) {
	live := "sha256:" + strings.Repeat("2", 64)
	differs := &State{Differs: []string{"kube-apiserver", "etcd"}, LiveHash: live, LiveResourceVersion: "406"}
	inSync := &State{InSync: true, LiveHash: live, LiveResourceVersion: "406"}
	cannot := &State{Error: "kubeadm failed: exit status 1", LiveHash: live, LiveResourceVersion: "406"}
	up := &Upgrade{From: "v1.36.3", To: "v1.37.2", State: "upgrading-control-plane-cp-1"}
	rollbackFailed := &rollout.Status{ID: 2, Kind: rollout.KindRollout, Phase: rollout.Failed, Target: rollout.Ref{Hash: live},
		Nodes: []rollout.Node{{Name: "cp-2", Phase: rollout.NodeRollbackFailed, Message: "etcd is down"}}}
	for _, tc := range []struct {
		name string
		st   *State
		last *rollout.Status
		up   *Upgrade
		want Condition
	}{
		{"not yet upgraded", differs, nil, up,
			Condition{corev1.ConditionUnknown, ReasonUpgradeInProgress,
				"the control plane of node cp-2 does not run the live kubeadm-config document (resourceVersion 406): kube-apiserver, etcd differ, while an upgrade from v1.36.3 to v1.37.2 is in progress (state upgrading-control-plane-cp-1): no verdict until it is complete or aborted"}},
		{"a record without versions", differs, nil, &Upgrade{State: "upgrading-first-master"},
			Condition{corev1.ConditionUnknown, ReasonUpgradeInProgress,
				"the control plane of node cp-2 does not run the live kubeadm-config document (resourceVersion 406): kube-apiserver, etcd differ, while an upgrade from (unknown) to (unknown) is in progress (state upgrading-first-master): no verdict until it is complete or aborted"}},
		{"no upgrade in progress", differs, nil, nil,
			Condition{corev1.ConditionTrue, ReasonComponentsDiffer,
				"the control plane of node cp-2 does not run the live kubeadm-config document (resourceVersion 406): kube-apiserver, etcd differ"}},
		{"upgraded already", inSync, nil, up,
			Condition{corev1.ConditionFalse, ReasonInSync, "node cp-2 runs the live kubeadm-config document (resourceVersion 406)"}},
		{"a rollback that failed", differs, rollbackFailed, up,
			Condition{corev1.ConditionTrue, ReasonRollbackFailed,
				"node cp-2's turn in rollout 2 failed and so did its rollback (etcd is down): a component may be down: kube-apiserver, etcd differ"}},
		{"the state cannot be found", cannot, nil, up,
			Condition{corev1.ConditionUnknown, ReasonStateUnknown,
				"the agent cannot tell whether node cp-2 runs the live kubeadm-config document (resourceVersion 406): kubeadm failed: exit status 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, OutOfDate("cp-2", tc.st, tc.last, tc.up)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestOutOfDateCutsALongTurnMessage(t *testing.T) {
	st := &State{Differs: []string{"kube-apiserver"}, LiveHash: "sha256:a"}
	last := &rollout.Status{ID: 1, Kind: rollout.KindRollout, Target: rollout.Ref{Hash: "sha256:a"},
		Nodes: []rollout.Node{{Name: "cp-0", Phase: rollout.NodeRolledBack, Message: strings.Repeat("é", 400)}}}
	got := OutOfDate("cp-0", st, last, nil)
	if !strings.Contains(got.Message, strings.Repeat("é", maxTurnMessage/2)+"...)") || strings.Contains(got.Message, strings.Repeat("é", maxTurnMessage/2+1)) {
		t.Errorf("the turn's message is not cut at %d bytes on a rune boundary: %q", maxTurnMessage, got.Message)
	}
}

func TestStopped(t *testing.T) {
	got := Stopped("cp-0", "agent/cp-0/42-abcdef")
	want := Condition{corev1.ConditionUnknown, ReasonAgentStopped,
		"agent agent/cp-0/42-abcdef of node cp-0 stopped: nothing checks the node's configuration until an agent runs on it again"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
