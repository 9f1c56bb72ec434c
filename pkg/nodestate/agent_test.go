package nodestate

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSyncWith(t *testing.T) {
	live, older := "sha256:"+strings.Repeat("2", 64), "sha256:"+strings.Repeat("1", 64)
	withState := func(s *State) Agent { return Agent{Node: "cp-0", Liveness: AgentAlive, State: s} }
	for _, tc := range []struct {
		name  string
		agent Agent
		sync  Sync
		why   string
	}{
		{"no agent", Agent{Node: "cp-0", Liveness: AgentNone}, SyncUnknown, "no agent"},
		{"no state", withState(nil), SyncUnknown, "the agent has published no state"},
		{"damaged state", Agent{Liveness: AgentAlive, StateError: "not a node state"}, SyncUnknown, "not a node state"},
		{"the agent could not tell", withState(&State{Error: "kubeadm failed"}), SyncUnknown, "kubeadm failed"},
		{"in sync", withState(&State{InSync: true, LiveHash: live}), SyncYes, ""},
		{"differs", withState(&State{Differs: []string{"kube-apiserver", "kube-scheduler"}, LiveHash: live}), SyncNo, "kube-apiserver, kube-scheduler"},
		{"checked against another document", withState(&State{InSync: true, LiveHash: older, LiveResourceVersion: "790"}),
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
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("cp-0"), Labels: map[string]string{Label: "cp-0"}}}
	a, ok := Judge(l, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), DefaultStaleAfter)
	if !ok || a.Liveness != AgentLost || a.LastSeen != nil || a.Seen() != "lost" {
		t.Fatalf("got %+v", a)
	}
}

// TestStaleAfterIsTheLeasesOwnDuration (R13): each Lease is judged by the
// duration its agent wrote (three of its heartbeats), unless overridden.
func TestStaleAfterIsTheLeasesOwnDuration(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lease := func(age time.Duration, seconds int32) *coordinationv1.Lease {
		rt := metav1.NewMicroTime(now.Add(-age))
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &rt}}
		if seconds > 0 {
			l.Spec.LeaseDurationSeconds = &seconds
		}
		return l
	}
	for _, tc := range []struct {
		name     string
		l        *coordinationv1.Lease
		override time.Duration
		alive    bool
	}{
		{"a 30s heartbeat, renewed 35s ago", lease(35*time.Second, 90), 0, true},
		{"a 2s heartbeat, renewed 7s ago", lease(7*time.Second, 6), 0, false},
		{"no duration, renewed 30s ago", lease(DefaultStaleAfter, 0), 0, true},
		{"no duration, renewed 31s ago", lease(DefaultStaleAfter+time.Second, 0), 0, false},
		{"overridden shorter", lease(35*time.Second, 90), 10 * time.Second, false},
		{"overridden longer", lease(7*time.Second, 6), time.Minute, true},
	} {
		if got := Alive(tc.l, now, tc.override); got != tc.alive {
			t.Errorf("%s: alive %v, want %v", tc.name, got, tc.alive)
		}
	}
}
