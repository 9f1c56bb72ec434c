package nodestate

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// ConditionType is the Node condition each agent keeps on its own Node, as
// node-problem-detector keeps its own: True while the node is out of date
// with kubeadm-config. `kubectl describe node` shows it, and so does every
// monitor that reads Node conditions (kube-state-metrics'
// kube_node_status_condition).
const ConditionType corev1.NodeConditionType = "KubeadmConfigOutOfDate"

// The reasons of the condition.
const (
	// ReasonInSync (False): the node's control plane runs what the live
	// kubeadm-config document renders to on it.
	ReasonInSync = "InSync"
	// ReasonComponentsDiffer (True): components of the node run another
	// manifest than the live document renders to.
	ReasonComponentsDiffer = "ComponentsDiffer"
	// ReasonTurnRolledBack (True): the node's turn in the last rollout of
	// the live document failed and was rolled back: the node runs what it
	// ran before.
	ReasonTurnRolledBack = "TurnRolledBack"
	// ReasonRollbackFailed (True): the node's last turn failed and so did
	// its rollback: a component may be down.
	ReasonRollbackFailed = "RollbackFailed"
	// ReasonStateUnknown (Unknown): the agent cannot tell (kubeadm cannot
	// render, kubeadm-config cannot be read, ...).
	ReasonStateUnknown = "StateUnknown"
	// ReasonAgentStopped (Unknown): the agent was stopped; nothing checks
	// the node until an agent runs on it again.
	ReasonAgentStopped = "AgentStopped"
	// ReasonUpgradeInProgress (Unknown): the node does not run what the
	// live document renders to while the upgrade record says an upgrade is
	// in progress. Once the first node has written the target release into
	// kubeadm-config, every node not yet upgraded renders differently (the
	// new release's images and flags) until its own step: that is the
	// upgrade's course, not a node out of date, and it has no verdict
	// until the upgrade is complete or aborted.
	ReasonUpgradeInProgress = "UpgradeInProgress"
)

// Upgrade is an upgrade the upgrade record says is in progress, from its
// start until it is complete or aborted (a failed step included), as
// reconfigure refuses to run during one.
type Upgrade struct {
	From, To string
	// State is the record's state.
	State string
}

// Condition is the condition's verdict: what the Node shows, without its
// times, which its writer keeps.
type Condition struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// maxTurnMessage bounds how much of a turn's message the condition
// repeats; the rollout record holds it whole.
const maxTurnMessage = 300

// OutOfDate judges whether node is out of date with kubeadm-config, from
// what its agent found on it (st: nil before it looked), its last turn in
// a rollout (last: the record's current or last rollout, nil when none)
// and the upgrade in progress (up: nil when none is).
//
// A node found running the live document is in date, whatever its last
// turn was: a rollout that failed on it is over once the document it
// carried is no longer live (put back, undone). Otherwise a turn that
// failed says why the node is out of date: a rollback that failed, always
// (a component may be down); a turn rolled back, while the rollout's
// document is the live one. Then, during an upgrade, components that
// differ are no verdict (Unknown, UpgradeInProgress); otherwise they make
// the node out of date; and when the agent could not find the node's
// state, Unknown.
func OutOfDate(node string, st *State, last *rollout.Status, up *Upgrade) Condition {
	var turn *rollout.Node
	if last != nil {
		if e, ok := last.Lookup(node); ok {
			turn = &e
		}
	}
	known := st != nil && st.Error == ""
	live := "the live kubeadm-config document"
	if st != nil && st.LiveResourceVersion != "" {
		live += " (resourceVersion " + st.LiveResourceVersion + ")"
	}
	switch {
	case known && st.InSync:
		return Condition{corev1.ConditionFalse, ReasonInSync, fmt.Sprintf("node %s runs %s", node, live)}
	case turn != nil && turn.Phase == rollout.NodeRollbackFailed:
		return Condition{corev1.ConditionTrue, ReasonRollbackFailed,
			fmt.Sprintf("node %s's turn in %s %d failed and so did its rollback (%s): a component may be down%s",
				node, last.Kind, last.ID, cut(turn.Message), differing(st))}
	case turn != nil && turn.Phase == rollout.NodeRolledBack && st != nil && st.LiveHash != "" && st.LiveHash == last.Target.Hash:
		return Condition{corev1.ConditionTrue, ReasonTurnRolledBack,
			fmt.Sprintf("node %s's turn in %s %d of %s failed and was rolled back (%s)%s",
				node, last.Kind, last.ID, live, cut(turn.Message), differing(st))}
	case known && up != nil:
		return Condition{corev1.ConditionUnknown, ReasonUpgradeInProgress,
			fmt.Sprintf("the control plane of node %s does not run %s%s, while an upgrade from %s to %s is in progress (state %s): no verdict until it is complete or aborted",
				node, live, differing(st), orUnknown(up.From), orUnknown(up.To), up.State)}
	case !known:
		why := "its agent has not looked yet"
		if st != nil {
			why = st.Error
		}
		return Condition{corev1.ConditionUnknown, ReasonStateUnknown,
			fmt.Sprintf("the agent cannot tell whether node %s runs %s: %s", node, live, why)}
	}
	return Condition{corev1.ConditionTrue, ReasonComponentsDiffer,
		fmt.Sprintf("the control plane of node %s does not run %s%s", node, live, differing(st))}
}

// Stopped is the condition an agent leaves when it stops cleanly: nobody
// checks the node any more, so nobody can say.
func Stopped(node, agent string) Condition {
	return Condition{corev1.ConditionUnknown, ReasonAgentStopped,
		fmt.Sprintf("agent %s of node %s stopped: nothing checks the node's configuration until an agent runs on it again", agent, node)}
}

// differing names the components st found differing, for a message.
func differing(st *State) string {
	if st == nil || st.Error != "" || len(st.Differs) == 0 {
		return ""
	}
	verb := " differ"
	if len(st.Differs) == 1 {
		verb = " differs"
	}
	return ": " + strings.Join(st.Differs, ", ") + verb
}

// cut shortens a turn's message for the condition.
func cut(s string) string {
	if len(s) <= maxTurnMessage {
		return s
	}
	s = s[:maxTurnMessage]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

func orUnknown(v string) string {
	if v == "" {
		return "(unknown)"
	}
	return v
}
