package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// The operator's verbs with the real agents: three local control-plane
// nodes in the test's own network namespace, an agent on each as a plain
// process, and every rollout started, held, followed and undone through the
// built plugin and the real kubectl.

func TestRolloutOnAgents(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	c := startAgentCluster(t)
	runSteps(t, c, []step[*agentCluster]{
		{"nodes: out of sync after a patch without a rollout, in sync after rollout start --wait", rolloutNodesInSync},
		{"patch --rollout --wait carries the write to every node, one at a time", rolloutPatchWait},
		{"--canary 1 pauses after one node; resume finishes", rolloutCanary},
		{"a bad flag: start --wait exits 8 naming the node; undo --wait puts the document and every node back", rolloutBadFlagUndo},
		{"a missing agent: the preflight names it, and nothing starts", rolloutMissingAgent},
	})
}

// plugin runs `kubectl kubeadmcfg ARGS` against the local control plane.
func (c *agentCluster) plugin(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	full := append(append([]string{"kubeadmcfg"}, args...), "--kubeconfig", c.Kubeconfig)
	return runLong(t, timeout, "kubectl", full...)
}

// nodesView runs `nodes -o json`.
func (c *agentCluster) nodesView(t *testing.T) nodesView {
	t.Helper()
	r := c.plugin(t, time.Minute, "nodes", "-o", "json")
	wantExit(t, r, 0)
	var v nodesView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("nodes -o json: %v\n%s", err, r.stdout)
	}
	return v
}

// wantNodes waits until `nodes -o json` shows every node with sync and
// reason (the agents look again after a change, within seconds).
func (c *agentCluster) wantNodes(t *testing.T, sync nodestate.Sync, reason string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v := c.nodesView(t)
		ok := len(v.Nodes) == 3
		for _, n := range v.Nodes {
			ok = ok && n.InSync == sync && n.InSyncReason == reason && n.Agent.Liveness == nodestate.AgentAlive
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes does not show every node %s (%q): %+v", sync, reason, v.Nodes)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// wantAPIServerFlag checks that every kube-apiserver process runs with
// flag.
func (c *agentCluster) wantAPIServerFlag(t *testing.T, flag string) {
	t.Helper()
	lines := c.apiServers(t)
	if len(lines) != 3 {
		t.Fatalf("want 3 kube-apiserver processes, got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if !strings.Contains(l, " "+flag) {
			t.Errorf("a kube-apiserver runs without %s: %s", flag, l)
		}
	}
}

// wantEveryNode checks that rollout s took every node, each started once.
func wantEveryNode(t *testing.T, s *rollout.Status, phase rollout.NodePhase) {
	t.Helper()
	if len(s.Nodes) != 3 {
		t.Fatalf("rollout %d has %d nodes", s.ID, len(s.Nodes))
	}
	for _, n := range s.Nodes {
		if n.Phase != phase || n.Starts != 1 {
			t.Errorf("rollout %d, node %s: %s with %d starts, want %s once", s.ID, n.Name, n.Phase, n.Starts, phase)
		}
	}
}

func rolloutNodesInSync(t *testing.T, c *agentCluster) {
	c.wantNodes(t, nodestate.SyncYes, "")
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxbackup=7")
	c.wantNodes(t, nodestate.SyncNo, "kube-apiserver")
	r := c.plugin(t, 8*time.Minute, "rollout", "start", "--wait")
	wantEnded(t, r, 0)
	if !strings.Contains(r.stdout, "Succeeded: every node runs sha256:") {
		t.Errorf("start --wait said %s", r)
	}
	wantEveryNode(t, c.current(t).Status, rollout.NodeUpdated)
	c.wantAPIServerFlag(t, "--audit-log-maxbackup=7")
	c.wantNodes(t, nodestate.SyncYes, "")
	c.wantOneAtATime(t)
}

func rolloutPatchWait(t *testing.T, c *agentCluster) {
	r := c.plugin(t, 8*time.Minute, "patch", "--no-backup", "--set", "apiServer.extraArgs.audit-log-maxage=9", "--rollout", "--wait")
	wantEnded(t, r, 0)
	for _, want := range []string{"kubeadm-config patched", "started: sha256:", "(patch, resourceVersion", "Succeeded: every node runs"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("patch --rollout --wait did not say %q: %s", want, r)
		}
	}
	rec := c.current(t)
	if string(rec.Target) != c.liveDocument(t) || rec.Status.Target.Source != rollout.SourcePatch || rec.Status.Previous == nil {
		t.Errorf("the rollout does not pin the bytes written: %+v", rec.Status)
	}
	wantEveryNode(t, rec.Status, rollout.NodeUpdated)
	c.wantAPIServerFlag(t, "--audit-log-maxage=9")
	if got := c.sawInProgress(rec.Status.ID); !slices.Equal(got, c.names()) {
		t.Errorf("the watch saw %v in progress, want every node in order %v", got, c.names())
	}
	c.wantOneAtATime(t)
}

func rolloutCanary(t *testing.T, c *agentCluster) {
	before := c.apiServers(t)
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxsize=50")
	wantExit(t, c.plugin(t, time.Minute, "rollout", "start", "--canary", "1"), 0)
	rec := c.waitRecord(t, 5*time.Minute, "paused", func(r *rollout.Record) bool { return r.Status.Phase == rollout.Paused })
	s := rec.Status
	if s.Nodes[0].Phase != rollout.NodeUpdated || s.Nodes[1].Phase != rollout.NodePending || s.Nodes[2].Phase != rollout.NodePending {
		t.Fatalf("paused with %v, want the first node alone done", []rollout.NodePhase{s.Nodes[0].Phase, s.Nodes[1].Phase, s.Nodes[2].Phase})
	}
	// Paused for good: nothing moves while it waits.
	time.Sleep(3 * agentHeartbeat)
	if got := c.current(t).Status; got.Phase != rollout.Paused || got.Nodes[1].Phase != rollout.NodePending {
		t.Fatalf("the rollout moved while paused: %+v", got)
	}
	after := c.apiServers(t)
	for _, l := range after {
		has := strings.Contains(l, " --audit-log-maxsize=50")
		if has != strings.Contains(l, "/cp-0/") {
			t.Errorf("while paused, only cp-0 runs the new flag; got: %s", l)
		}
	}
	if len(before) != 3 {
		t.Fatalf("want 3 kube-apiservers before, got %v", before)
	}
	wantExit(t, c.plugin(t, time.Minute, "rollout", "resume"), 0)
	r := c.plugin(t, 8*time.Minute, "rollout", "status", "-w")
	wantEnded(t, r, 0)
	wantEveryNode(t, c.current(t).Status, rollout.NodeUpdated)
	c.wantAPIServerFlag(t, "--audit-log-maxsize=50")
	c.wantOneAtATime(t)
}

func rolloutBadFlagUndo(t *testing.T, c *agentCluster) {
	before := c.allManifests(t)
	good := c.liveDocument(t)
	c.patch(t, "--set", "apiServer.extraArgs.no-such-flag=1")
	r := c.plugin(t, 8*time.Minute, "rollout", "start", "--wait")
	wantEnded(t, r, 8)
	wantStderr(t, r, "failed: node cp-0 failed and was rolled back", "the nodes after cp-0 are untouched: cp-1, cp-2")
	s := c.current(t).Status
	if s.Phase != rollout.Failed || !strings.Contains(s.Message, "node cp-0") || s.Nodes[0].Phase != rollout.NodeRolledBack ||
		!strings.Contains(s.Nodes[0].Message, "kube-apiserver") {
		t.Fatalf("the record does not say Failed on cp-0 with the reason: %+v", s)
	}
	after := c.allManifests(t)
	for _, name := range []string{"cp-1", "cp-2"} {
		if diff := cmpManifests(before[name], after[name]); diff != "" {
			t.Errorf("%s was touched: %s", name, diff)
		}
	}

	r = c.plugin(t, 8*time.Minute, "rollout", "undo", "--wait", "--no-backup")
	wantEnded(t, r, 0)
	if got := c.liveDocument(t); got != good {
		t.Errorf("kubeadm-config after the undo:\n%s\nwant, byte for byte:\n%s", got, good)
	}
	after = c.allManifests(t)
	for _, name := range c.names() {
		if diff := cmpManifests(before[name], after[name]); diff != "" {
			t.Errorf("%s is not back on its previous manifests: %s", name, diff)
		}
	}
	c.wantNodes(t, nodestate.SyncYes, "")
}

func rolloutMissingAgent(t *testing.T, c *agentCluster) {
	if r := c.kill(t, "cp-2", syscall.SIGTERM); r.code != 0 {
		t.Fatalf("the agent of cp-2 did not stop cleanly: %s", r)
	}
	id := c.current(t).Status.ID
	r := c.plugin(t, time.Minute, "rollout", "start")
	wantExit(t, r, 4)
	wantStderr(t, r, "preflight failed, nothing was started: node cp-2: no agent (no Lease kubeadmcfg-agent-cp-2)")
	if got := c.current(t).Status.ID; got != id {
		t.Errorf("a refused start wrote rollout %d", got)
	}
	c.startAgent(t, "cp-2")
	c.wantNodes(t, nodestate.SyncYes, "")
}
