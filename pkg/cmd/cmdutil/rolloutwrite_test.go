package cmdutil

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// The progress of a --wait: a line per change, each reason said once. A
// failed rollout's message repeats its node's, and the error the wait ends
// with says it again: the rollout's line leaves it out.
func TestRolloutProgress(t *testing.T) {
	const why = "kube-apiserver keeps exiting with its new manifest"
	node := func(phase rollout.NodePhase, msg string) []rollout.Node {
		n := []rollout.Node{{Name: "cp-0", Phase: phase, Message: msg}, {Name: "cp-1", Phase: rollout.NodePending}}
		if phase != rollout.NodePending {
			n[0].Components = []string{"kube-apiserver"}
		}
		return n
	}
	var out bytes.Buffer
	progress := RolloutProgress(&out)
	for _, s := range []*rollout.Status{
		{ID: 2, Phase: rollout.Progressing, Nodes: node(rollout.NodePending, "")},
		{ID: 2, Phase: rollout.Progressing, Nodes: node(rollout.NodeInProgress, "")},
		{ID: 2, Phase: rollout.Failed, Message: "node cp-0 failed and was rolled back: " + why, Nodes: node(rollout.NodeRolledBack, why)},
	} {
		progress(s)
	}
	want := `rollout 2: Progressing, 0 of 2 nodes done
rollout 2: node cp-0 InProgress (kube-apiserver)
rollout 2: node cp-0 RolledBack (kube-apiserver): ` + why + `
rollout 2: Failed
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}
