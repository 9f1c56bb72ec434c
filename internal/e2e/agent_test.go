package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodeagent "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/agent"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// The node agents on a three-node control plane, in the test's own network
// namespace. The test plays the client that starts a rollout: it writes
// the record through the model and goes away; everything after that is
// the agents' doing.

func TestAgent(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	c := startAgentCluster(t)
	runSteps(t, c, []step[*agentCluster]{
		{"a node out of sync after a patch, in sync after a rollout of it across 3 nodes, one at a time; the alarm says so", agentSuccess},
		{"a bad flag fails the first node, which rolls back; the others are untouched; cp-0's alarm says so", agentBadFlag},
		{"a record edited into garbage is reported and changes nothing", agentGarbage},
		{"an agent SIGKILLed mid-apply is seen lost, and restarted it completes its node", agentKilled},
		{"an agent SIGKILLed while a bad flag crashes: restarted, it puts the node back on its manifests from before", agentKilledBadFlag},
		{"a try not confirmed is reverted by the agents; a confirmed one stays", agentTry},
		{"SIGTERM stops an agent cleanly: exit 0, no lease left, its Node's condition Unknown", agentStop},
	})
}

func agentSuccess(t *testing.T, c *agentCluster) {
	c.waitStates(t, "in sync", func(st *nodestate.State) bool { return st.InSync && st.Error == "" })
	c.waitConditions(t, alarmWithin, corev1.ConditionFalse, c.every(nodestate.ReasonInSync))
	c.nodesExitCode(t, exitcode.OK)
	patched := time.Now()
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxbackup=7")
	// The alarm: every Node out of date within the resync period, every
	// agent's gauge at 0 for kube-apiserver, nodes --exit-code non-zero.
	c.waitConditions(t, alarmWithin, corev1.ConditionTrue, c.every(nodestate.ReasonComponentsDiffer))
	t.Logf("every Node carried %s=True %s after the patch", nodestate.ConditionType, time.Since(patched).Round(100*time.Millisecond))
	c.waitStates(t, "kube-apiserver out of sync", func(st *nodestate.State) bool {
		return !st.InSync && slices.Equal(st.Differs, []string{"kube-apiserver"})
	})
	c.wantGauges(t, 0, "kube-apiserver")
	c.nodesExitCode(t, exitcode.OutOfSync)
	id := c.start(t, 0)
	s := c.waitEnded(t, 6*time.Minute)
	if s.ID != id || s.Phase != rollout.Succeeded {
		t.Fatalf("rollout %d: want Succeeded, got %+v", id, s)
	}
	for _, n := range s.Nodes {
		if n.Phase != rollout.NodeUpdated || n.Starts != 1 || !slices.Equal(n.Components, []string{"kube-apiserver"}) {
			t.Errorf("node %s: %+v", n.Name, n)
		}
	}
	lines := c.apiServers(t)
	if len(lines) != 3 {
		t.Errorf("want 3 kube-apiserver processes, got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if !strings.Contains(l, " --audit-log-maxbackup=7") {
			t.Errorf("a kube-apiserver runs without the new flag: %s", l)
		}
	}
	c.wantOneAtATime(t)
	if got := c.sawInProgress(id); !slices.Equal(got, c.names()) {
		t.Errorf("the watch saw %v in progress, want every node in order %v", got, c.names())
	}
	if diff := cmp.Diff(map[string]int{"cp-0": 1, "cp-1": 1, "cp-2": 1}, c.nodeStarted(t, id)); diff != "" {
		t.Errorf("NodeStarted Events per node (-want +got):\n%s", diff)
	}
	c.waitStates(t, "in sync", func(st *nodestate.State) bool { return st.InSync && st.LastKnownGood != "" })
	c.waitConditions(t, alarmWithin, corev1.ConditionFalse, c.every(nodestate.ReasonInSync))
	c.wantGauges(t, 1)
	c.nodesExitCode(t, exitcode.OK)
	// One Event per transition, though the agents passed many times (a
	// resync every 30s at least, and every change of the record).
	c.wantNodeEvents(t, "oi")
}

func agentBadFlag(t *testing.T, c *agentCluster) {
	before := c.allManifests(t)
	good := c.liveDocument(t)
	c.patch(t, "--set", "apiServer.extraArgs.no-such-flag=1")
	c.waitConditions(t, alarmWithin, corev1.ConditionTrue, c.every(nodestate.ReasonComponentsDiffer))
	outOfDate := map[string]metav1.Time{}
	for _, name := range c.names() {
		cond, _ := c.condition(t, name)
		outOfDate[name] = cond.LastTransitionTime
	}
	id := c.start(t, 0)
	s := c.waitEnded(t, 6*time.Minute)
	if s.ID != id || s.Phase != rollout.Failed || !strings.Contains(s.Message, "node cp-0 failed and was rolled back") {
		t.Fatalf("rollout %d: want Failed naming cp-0, got %+v", id, s)
	}
	// The seed's alarm: cp-0, rolled back, out of date because its turn
	// failed; the other nodes as the patch left them.
	c.waitConditions(t, alarmWithin, corev1.ConditionTrue, map[string]string{
		"cp-0": nodestate.ReasonTurnRolledBack, "cp-1": nodestate.ReasonComponentsDiffer, "cp-2": nodestate.ReasonComponentsDiffer})
	for _, name := range c.names() {
		if cond, _ := c.condition(t, name); !cond.LastTransitionTime.Equal(new(outOfDate[name])) {
			t.Errorf("node %s: its condition's last transition moved from %s to %s, though it stayed True", name, outOfDate[name], cond.LastTransitionTime)
		}
	}
	first := s.Nodes[0]
	if first.Phase != rollout.NodeRolledBack || !strings.Contains(first.Message, "kube-apiserver") {
		t.Errorf("cp-0: want RolledBack with the reason, got %+v", first)
	}
	for _, n := range s.Nodes[1:] {
		if n.Phase != rollout.NodePending || n.Starts != 0 {
			t.Errorf("node %s was started: %+v", n.Name, n)
		}
	}
	after := c.allManifests(t)
	for _, name := range c.names() {
		if diff := cmpManifests(before[name], after[name]); diff != "" {
			t.Errorf("%s: the manifests changed: %s", name, diff)
		}
	}
	if diff := cmp.Diff(map[string]int{"cp-0": 1}, c.nodeStarted(t, id)); diff != "" {
		t.Errorf("NodeStarted Events per node (-want +got):\n%s", diff)
	}
	c.wantOneAtATime(t)
	// Back to the document every node runs.
	c.putDocument(t, good)
	c.waitStates(t, "in sync", func(st *nodestate.State) bool { return st.InSync })
	c.waitConditions(t, alarmWithin, corev1.ConditionFalse, c.every(nodestate.ReasonInSync))
	c.wantNodeEvents(t, "oioi")
}

func agentGarbage(t *testing.T, c *agentCluster) {
	before := c.allManifests(t)
	updates := c.updates()
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxbackup=9")
	// A rollout of the patch, edited by hand into garbage in the same
	// write: no agent ever sees it whole.
	ctx := context.Background()
	cms := c.client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, rollout.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := cms.Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rollout.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(rollout.Clock{Now: time.Now(), By: "e2e"}, rollout.Spec{Target: []byte(live.Data["ClusterConfiguration"]),
		TargetResourceVersion: live.ResourceVersion, Nodes: c.names()}); err != nil {
		t.Fatal(err)
	}
	if err := r.ToConfigMap(cm); err != nil {
		t.Fatal(err)
	}
	whole := cm.Data[rollout.KeyStatus]
	cm.Data[rollout.KeyStatus] = whole + "nodes: [[[\n"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range c.names() {
		c.waitLog(t, name, "warning RecordDamaged: the rollout record kube-system/kubeadmcfg-rollout is damaged: data.status:")
	}
	// The agents read the record again within their resync; give them one.
	time.Sleep(nodeagent.DefaultResync + 2*time.Second)
	after := c.allManifests(t)
	for _, name := range c.names() {
		if diff := cmpManifests(before[name], after[name]); diff != "" {
			t.Errorf("%s: the manifests changed: %s", name, diff)
		}
	}
	if diff := cmp.Diff(updates, c.updates()); diff != "" {
		t.Errorf("components restarted (-before +after):\n%s", diff)
	}
	for _, name := range c.names() {
		if st, alive := c.nodeState(t, name); st == nil || !alive {
			t.Errorf("node %s: its agent stopped publishing: %+v", name, st)
		}
	}
	// Fixed by hand, the rollout goes on.
	cm.Data[rollout.KeyStatus] = whole
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := c.waitEnded(t, 6*time.Minute); s.Phase != rollout.Succeeded {
		t.Fatalf("the repaired rollout: want Succeeded, got %+v", s)
	}
}

func agentKilled(t *testing.T, c *agentCluster) {
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxbackup=10")
	first := c.node(t, "cp-0")
	updates := first.Runner.Stats("kube-apiserver").Updates
	id := c.start(t, 0)
	// Killed as soon as the kubelet runs cp-0's new kube-apiserver
	// manifest: the agent is waiting for it to come up healthy.
	deadline := time.Now().Add(3 * time.Minute)
	for first.Runner.Stats("kube-apiserver").Updates == updates {
		if time.Now().After(deadline) {
			t.Fatal("cp-0's kube-apiserver manifest was never replaced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	killed := time.Now()
	c.kill(t, "cp-0", syscall.SIGKILL)
	if n, _ := c.current(t).Status.Lookup("cp-0"); n.Phase != rollout.NodeInProgress {
		t.Fatalf("cp-0 is not in progress when its agent is killed: %+v", n)
	}
	stale := 3 * agentHeartbeat
	for {
		if _, alive := c.nodeState(t, "cp-0"); !alive {
			break
		}
		if time.Since(killed) > stale+3*time.Second {
			t.Fatalf("the agent of cp-0 still looks alive %s after it was killed (stale after %s)", time.Since(killed), stale)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the agent of cp-0 was seen lost %s after it was killed", time.Since(killed).Round(100*time.Millisecond))
	if r := c.current(t); r.Status.Nodes[1].Phase != rollout.NodePending {
		t.Errorf("cp-1 went while cp-0 was in progress: %+v", r.Status.Nodes[1])
	}
	c.startAgent(t, "cp-0")
	s := c.waitEnded(t, 6*time.Minute)
	if s.ID != id || s.Phase != rollout.Succeeded {
		t.Fatalf("rollout %d: want Succeeded, got %+v", id, s)
	}
	if n := s.Nodes[0]; n.Phase != rollout.NodeUpdated || n.Starts != 1 || n.Resumes != 1 {
		t.Errorf("cp-0: want Updated, started once and resumed once, got %+v", n)
	}
	if diff := cmp.Diff(map[string]int{"cp-0": 1, "cp-1": 1, "cp-2": 1}, c.nodeStarted(t, id)); diff != "" {
		t.Errorf("NodeStarted Events per node (-want +got):\n%s", diff)
	}
	for _, l := range c.apiServers(t) {
		if !strings.Contains(l, " --audit-log-maxbackup=10") {
			t.Errorf("a kube-apiserver runs without the new flag: %s", l)
		}
	}
	c.wantOneAtATime(t)
}

func agentKilledBadFlag(t *testing.T, c *agentCluster) {
	before := c.allManifests(t)
	good := c.liveDocument(t)
	c.patch(t, "--set", "apiServer.extraArgs.no-such-flag=2")
	first := c.node(t, "cp-0")
	updates := first.Runner.Stats("kube-apiserver").Updates
	id := c.start(t, 0)
	deadline := time.Now().Add(3 * time.Minute)
	for first.Runner.Stats("kube-apiserver").Updates == updates {
		if time.Now().After(deadline) {
			t.Fatal("cp-0's kube-apiserver manifest was never replaced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.kill(t, "cp-0", syscall.SIGKILL)
	if n, _ := c.current(t).Status.Lookup("cp-0"); n.Phase != rollout.NodeInProgress {
		t.Fatalf("cp-0 is not in progress when its agent is killed: %+v", n)
	}
	c.startAgent(t, "cp-0")
	s := c.waitEnded(t, 6*time.Minute)
	if s.ID != id || s.Phase != rollout.Failed {
		t.Fatalf("rollout %d: want Failed, got %+v", id, s)
	}
	n := s.Nodes[0]
	if n.Phase != rollout.NodeRolledBack || n.Starts != 1 || n.Resumes != 1 ||
		!strings.Contains(n.Message, "the node is back on its manifests from before the rollout") {
		t.Errorf("cp-0: want RolledBack by the resume, started once, got %+v", n)
	}
	after := c.allManifests(t)
	for _, name := range c.names() {
		if diff := cmpManifests(before[name], after[name]); diff != "" {
			t.Errorf("%s: the manifests are not those from before the rollout: %s", name, diff)
		}
	}
	if diff := cmp.Diff(map[string]int{"cp-0": 1}, c.nodeStarted(t, id)); diff != "" {
		t.Errorf("NodeStarted Events per node (-want +got):\n%s", diff)
	}
	c.putDocument(t, good)
	c.waitStates(t, "in sync", func(st *nodestate.State) bool { return st.InSync })
}

func agentTry(t *testing.T, c *agentCluster) {
	previous := c.liveDocument(t)
	before := c.allManifests(t)
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxbackup=11")
	id := c.startAndKillTheClient(t, 20*time.Second)
	c.waitRecord(t, 6*time.Minute, "awaiting confirmation", func(r *rollout.Record) bool {
		return r.Status.ID == id && r.Status.Phase == rollout.AwaitingConfirm
	})
	for _, l := range c.apiServers(t) {
		if !strings.Contains(l, " --audit-log-maxbackup=11") {
			t.Errorf("a kube-apiserver runs without the flag on trial: %s", l)
		}
	}
	// Nobody confirms: the agents revert it.
	r := c.waitRecord(t, 6*time.Minute, "reverted", func(r *rollout.Record) bool {
		return r.Status.Kind == rollout.KindRevert && !r.Status.Phase.Active()
	})
	if s := r.Status; s.Phase != rollout.Succeeded || !s.DocumentRestored || !slices.Equal(s.Order, []string{"cp-2", "cp-1", "cp-0"}) {
		t.Errorf("the revert: %+v", s)
	}
	if h := r.History[len(r.History)-2]; h.ID != id || h.Outcome != rollout.Reverted {
		t.Errorf("the history does not say rollout %d was reverted: %+v", id, r.History)
	}
	if got := c.liveDocument(t); got != previous {
		t.Errorf("kubeadm-config is not back on the previous document:\n%s", got)
	}
	after := c.allManifests(t)
	for _, name := range c.names() {
		if diff := cmpManifests(before[name], after[name]); diff != "" {
			t.Errorf("%s: the manifests are not back: %s", name, diff)
		}
	}
	c.wantOneAtATime(t)

	// Confirmed in time, it stays.
	c.patch(t, "--set", "apiServer.extraArgs.audit-log-maxbackup=12")
	tried := c.liveDocument(t)
	id = c.start(t, 20*time.Second)
	c.waitRecord(t, 6*time.Minute, "awaiting confirmation", func(r *rollout.Record) bool {
		return r.Status.ID == id && r.Status.Phase == rollout.AwaitingConfirm
	})
	wantExit(t, c.plugin(t, time.Minute, "rollout", "confirm"), 0)
	time.Sleep(25 * time.Second)
	if s := c.current(t).Status; s.ID != id || s.Phase != rollout.Succeeded {
		t.Errorf("the confirmed rollout: want Succeeded, got %+v", s)
	}
	if got := c.liveDocument(t); got != tried {
		t.Errorf("kubeadm-config changed after the confirmation:\n%s", got)
	}
	for _, l := range c.apiServers(t) {
		if !strings.Contains(l, " --audit-log-maxbackup=12") {
			t.Errorf("a kube-apiserver runs without the confirmed flag: %s", l)
		}
	}
}

func agentStop(t *testing.T, c *agentCluster) {
	before := c.nodeEvents(t)
	for _, name := range c.names() {
		r := c.kill(t, name, syscall.SIGTERM)
		if r.code != 0 || !strings.Contains(r.stderr, "deleted its lease") {
			t.Errorf("agent of %s: want exit 0 after deleting its lease, got %s", name, r)
		}
		// Nothing checks the node any more, and its Node says so.
		if cond, _ := c.condition(t, name); cond.Status != corev1.ConditionUnknown || cond.Reason != nodestate.ReasonAgentStopped {
			t.Errorf("node %s after its agent stopped: %s=%s (%s), want Unknown (%s)", name, nodestate.ConditionType, cond.Status, cond.Reason, nodestate.ReasonAgentStopped)
		}
		if _, err := c.client.CoordinationV1().Leases("kube-system").Get(context.Background(), nodestate.LeaseName(name), metav1.GetOptions{}); err == nil {
			t.Errorf("the lease of %s is still there", name)
		}
	}
	if diff := cmp.Diff(before, c.nodeEvents(t)); diff != "" {
		t.Errorf("a stop recorded an Event on a Node (-before +after)\n%s", diff)
	}
}

// startAndKillTheClient starts a rollout on trial with the built plugin,
// `rollout start --try TRY --wait`, and SIGKILLs that client as soon as the
// record holds the rollout: what happens next, the revert included, is the
// agents' doing alone.
func (c *agentCluster) startAndKillTheClient(t *testing.T, try time.Duration) int64 {
	t.Helper()
	before := c.current(t).Status.ID
	client := exec.Command("kubectl", "kubeadmcfg", "rollout", "start", "--try", try.String(), "--wait", "--kubeconfig", c.Kubeconfig)
	var out bytes.Buffer
	client.Stdout, client.Stderr = &out, &out
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	r := c.waitRecord(t, time.Minute, "holding the client's rollout", func(r *rollout.Record) bool { return r.Status.ID > before })
	_ = client.Process.Kill()
	if err := client.Wait(); err == nil {
		t.Fatalf("the client ended before it was killed:\n%s", out.String())
	}
	return r.Status.ID
}
