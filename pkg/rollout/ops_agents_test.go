package rollout

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOperatorJudgesAgentsOnTheServersClock: ages come from the Lease's renewTime
// and the server's now, never this host's clock.
func TestOperatorJudgesAgentsOnTheServersClock(t *testing.T) {
	w := healthy("cp-0")
	w.node("cp-1", true, true, base.Add(-40*time.Second))
	o, _ := w.operator(t)
	agents, err := o.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"cp-0": "alive (5s)", "cp-1": "lost (45s)", "cp-9": "none"} {
		if got := AgentFor(agents, node).Seen(); got != want {
			t.Errorf("%s: got %q, want %q", node, got, want)
		}
	}
	if got := joinNames(NodeNames([]string{"cp-1", "cp-2"}, agents)); got != "cp-0, cp-1, cp-2" {
		t.Errorf("node names: %s", got)
	}
}

func TestSyncWith(t *testing.T) {
	live := Hash(docV2)
	withState := func(s *NodeState) AgentStatus { return AgentStatus{Node: "cp-0", Liveness: AgentAlive, State: s} }
	for _, tc := range []struct {
		name  string
		agent AgentStatus
		sync  Sync
		why   string
	}{
		{"no agent", AgentStatus{Node: "cp-0", Liveness: AgentNone}, SyncUnknown, "no agent"},
		{"no state", withState(nil), SyncUnknown, "the agent has published no state"},
		{"damaged state", AgentStatus{Liveness: AgentAlive, StateError: "not a node state"}, SyncUnknown, "not a node state"},
		{"the agent could not tell", withState(&NodeState{Error: "kubeadm failed"}), SyncUnknown, "kubeadm failed"},
		{"in sync", withState(&NodeState{InSync: true, LiveHash: live}), SyncYes, ""},
		{"differs", withState(&NodeState{Differs: []string{"kube-apiserver", "kube-scheduler"}, LiveHash: live}), SyncNo, "kube-apiserver, kube-scheduler"},
		{"checked against another document", withState(&NodeState{InSync: true, LiveHash: Hash(docV1), LiveResourceVersion: "790"}),
			SyncUnknown, "checked against an older document (resourceVersion 790)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sync, why := tc.agent.SyncWith(live)
			if sync != tc.sync || why != tc.why {
				t.Errorf("got %s %q, want %s %q", sync, why, tc.sync, tc.why)
			}
		})
	}
}

func TestJudgeANeverRenewedLease(t *testing.T) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: AgentLeaseName("cp-0"), Labels: map[string]string{AgentLabel: "cp-0"}}}
	a, ok := judge(l, base, DefaultStaleAfter)
	if !ok || a.Liveness != AgentLost || a.LastSeen != nil || a.Seen() != "lost" {
		t.Fatalf("got %+v", a)
	}
}
