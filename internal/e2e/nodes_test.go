package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// nodesView is `nodes -o json`.
type nodesView struct {
	ConfigMap           string `json:"configMap"`
	LiveHash            string `json:"liveHash"`
	LiveResourceVersion string `json:"liveResourceVersion"`
	Nodes               []struct {
		Name         string          `json:"name"`
		ControlPlane bool            `json:"controlPlane"`
		Agent        nodestate.Agent `json:"agent"`
		InSync       nodestate.Sync  `json:"inSync"`
		InSyncReason string          `json:"inSyncReason"`
	} `json:"nodes"`
}

func (e *env) nodes() nodesView {
	e.t.Helper()
	r := e.plugin("nodes", "-o", "json")
	wantExit(e.t, r, 0)
	var v nodesView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		e.t.Fatalf("nodes -o json: %v\n%s", err, r.stdout)
	}
	return v
}

// TestNodesShowsPublishedState: from the API alone, each control-plane
// node's state as its agent published it, judged against the live document:
// a state found for an older document says nothing about the new one. The
// agents here are stand-ins publishing on their Leases.
func TestNodesShowsPublishedState(t *testing.T) {
	e := newEnv(t)
	cp := e.fakeControlPlane(3)
	live := rollout.Hash([]byte(e.document()))
	rv := e.configMapRV()
	cp.publish(cp.nodes[0], nodestate.State{AgentVersion: "v-test", InSync: true, LiveHash: live, LiveResourceVersion: rv,
		LastKnownGood: "kubeadm-config-rv" + rv, CheckedAt: time.Now().UTC().Format(time.RFC3339)})
	cp.publish(cp.nodes[1], nodestate.State{AgentVersion: "v-test", Differs: []string{"kube-apiserver"}, LiveHash: live,
		LiveResourceVersion: rv, CheckedAt: time.Now().UTC().Format(time.RFC3339)})
	cp.removeAgent(cp.nodes[2])

	v := e.nodes()
	if v.LiveHash != live || len(v.Nodes) != 3 {
		t.Fatalf("nodes: %+v", v)
	}
	want := []struct {
		sync     nodestate.Sync
		reason   string
		liveness nodestate.Liveness
	}{{nodestate.SyncYes, "", nodestate.AgentAlive}, {nodestate.SyncNo, "kube-apiserver", nodestate.AgentAlive}, {nodestate.SyncUnknown, "no agent", nodestate.AgentNone}}
	for i, w := range want {
		n := v.Nodes[i]
		if n.Name != cp.nodes[i] || !n.ControlPlane || n.InSync != w.sync || n.InSyncReason != w.reason || n.Agent.Liveness != w.liveness {
			t.Errorf("node %d: got %+v, want %+v", i, n, w)
		}
	}
	r := e.plugin("nodes")
	wantExit(t, r, 0)
	for _, line := range []string{
		cp.nodes[0] + "  alive  v-test   yes      -               kubeadm-config-rv" + rv,
		cp.nodes[1] + "  alive  v-test   no       kube-apiserver  -",
		cp.nodes[2] + "  none   -        unknown  no agent        -                ",
	} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("the table lacks %q:\n%s", line, r.stdout)
		}
	}

	// kubeadm-config changes and no agent has looked yet: unknown, not a
	// stale "yes".
	wantExit(t, e.plugin("patch", "--no-backup", "--set", "apiServer.extraArgs.audit-log-maxage=9"), 0)
	v = e.nodes()
	if n := v.Nodes[0]; n.InSync != nodestate.SyncUnknown || n.InSyncReason != "checked against an older document (resourceVersion "+rv+")" {
		t.Errorf("after a patch: %+v", n)
	}
}
