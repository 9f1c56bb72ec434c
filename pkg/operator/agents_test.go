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
