package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout/rollouttest"
)

// TestOperatorJudgesAgentsOnTheServersClock: ages come from the Lease's renewTime
// and the server's now, never this host's clock.
func TestOperatorJudgesAgentsOnTheServersClock(t *testing.T) {
	w := healthy("cp-0")
	w.node("cp-1", true, true, rollouttest.Base.Add(-40*time.Second))
	o, _ := w.operator(t)
	agents, err := o.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"cp-0": "alive (5s)", "cp-1": "lost (45s)", "cp-9": "none"} {
		if got := nodestate.AgentFor(agents, node).Seen(); got != want {
			t.Errorf("%s: got %q, want %q", node, got, want)
		}
	}
	if got := strings.Join(nodestate.NodeNames([]string{"cp-1", "cp-2"}, agents), ", "); got != "cp-0, cp-1, cp-2" {
		t.Errorf("node names: %s", got)
	}
}

// TestAgentsAreJudgedByTheirOwnLeaseDuration (R13): an agent that renews
// every 30s writes a 90s Lease and is alive 35s after its renewal; one
// that renews every 2s writes a 6s Lease and is lost 7s after it. A Lease
// without a duration is judged by nodestate.DefaultStaleAfter, and
// StaleAfter, when set, overrides every Lease's own.
func TestAgentsAreJudgedByTheirOwnLeaseDuration(t *testing.T) {
	w := &world{}
	now := rollouttest.Base.Add(5 * time.Second) // the operator's server clock
	w.node("cp-0", true, true, now.Add(-35*time.Second))
	w.node("cp-1", true, true, now.Add(-7*time.Second))
	w.node("cp-2", true, true, now.Add(-29*time.Second))
	w.leaseDuration("cp-0", 90)
	w.leaseDuration("cp-1", 6)
	o, _ := w.operator(t)
	for _, tc := range []struct {
		staleAfter time.Duration
		want       map[string]string
	}{
		{0, map[string]string{"cp-0": "alive (35s)", "cp-1": "lost (7s)", "cp-2": "alive (29s)"}},
		{10 * time.Second, map[string]string{"cp-0": "lost (35s)", "cp-1": "alive (7s)", "cp-2": "lost (29s)"}},
	} {
		o.StaleAfter = tc.staleAfter
		agents, err := o.Agents(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for node, want := range tc.want {
			if got := nodestate.AgentFor(agents, node).Seen(); got != want {
				t.Errorf("stale-after %s, %s: got %q, want %q", tc.staleAfter, node, got, want)
			}
		}
	}
}
