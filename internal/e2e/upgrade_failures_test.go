package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// An upgrade the agents carry out, when its steps fail: on one cluster of
// three stacked-etcd nodes at the previous release, in order,
//
//   - the first node's control-plane phase fails on a flag the new
//     kube-apiserver refuses: the node is put back, upgrade-apply --wait
//     exits 8, the others are untouched;
//   - resumed with the flag gone, the second node's kubeadm upgrade node
//     fails late, in its kubelet-config phase after it wrote the new
//     config.yaml (the seed): recorded by itself, the third node untouched;
//   - resumed again, the third node's agent is SIGKILLed in its
//     control-plane phase and started again: the step completes, its
//     kubeadm never runs twice at once;
//   - the second node's kubelet step fails: recorded by itself, and nothing
//     goes on;
//   - resumed with every cause fixed, upgrade-resume --wait completes the
//     upgrade, while a writer appended to kubeadm-config all along.

// refusedFlag is a kube-apiserver flag v1.36 takes and v1.37 refuses: the
// feature gate is locked to true from v1.37 on.
const refusedFlag = "PodReadyToStartContainersCondition=false"

func TestUpgradeFailuresByAgents(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	// The agents' --wait bounds how long kubeadm waits for the refused
	// kube-apiserver before it puts the manifests back.
	c := startAgentUpgradeCluster(t, time.Minute)
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	var w *appender
	runSteps(t, c, []step[*agentUpgradeCluster]{
		{"the first node's control-plane phase fails on a flag v1.37 refuses: cp-0 is back on v1.36.3, exit 8, the others untouched", func(t *testing.T, c *agentUpgradeCluster) {
			wantExit(t, run(t, "kubectl", "kubeadmcfg", "patch", "--no-backup", "--type", "json", "-p",
				`[{"op":"add","path":"/apiServer/extraArgs/-","value":{"name":"feature-gates","value":"`+refusedFlag+`"}}]`), 0)
			untouched := c.manifests(t, "cp-1", "cp-2")
			r := runLong(t, 15*time.Minute, "kubectl", "kubeadmcfg", "upgrade-apply", c.bins.Version, "--wait", "--timeout", "12m")
			wantEnded(t, r, 8)
			if !strings.Contains(r.stderr, "cp-0") {
				t.Errorf("upgrade-apply --wait does not name cp-0:\n%s", r)
			}
			rec := c.record(t)
			if rec.State != "upgrading-control-plane-cp-0-failed" || !strings.Contains(rec.Reason, "node cp-0") || !strings.Contains(rec.Reason, "phase control-plane") {
				t.Errorf("the upgrade is in %s: %s", rec.State, rec.Reason)
			}
			if p := rec.Agents.Progress("cp-0"); p.Outcome != upgradestate.NodeRolledBack {
				t.Errorf("cp-0's progress: %+v", p)
			}
			c.wantMirrorPods(t, "cp-0", c.bins.Previous.Version)
			c.wantComponents(t, c.bins.Previous.Version)
			c.wantUntouched(t, rec, untouched)
		}},
		{"resumed, cp-1's kubeadm upgrade node fails in its kubelet-config phase after writing config.yaml: recorded within 30s, cp-2 untouched", func(t *testing.T, c *agentUpgradeCluster) {
			wantExit(t, run(t, "kubectl", "kubeadmcfg", "patch", "--no-backup", "--type", "json", "-p",
				`[{"op":"test","path":"/apiServer/extraArgs/1/value","value":"`+refusedFlag+`"},{"op":"remove","path":"/apiServer/extraArgs/1"}]`), 0)
			w = startAppender(t, "during-upgrade")
			w.waitFor(t, 3)
			c.fault(t, "cp-1", testcluster.FaultKubeletConfig, true)
			untouched := c.manifests(t, "cp-2")
			resumed := time.Now()
			wantExit(t, run(t, "kubectl", "kubeadmcfg", "upgrade-resume"), 0)
			rec := c.waitFor(t, "upgrading-control-plane-cp-1-failed", time.Now().Add(10*time.Minute))
			// Within 30s of the phase's start, on the API server's clock,
			// as the record says both.
			p := rec.Agents.Progress("cp-1")
			began, err := time.Parse(time.RFC3339, p.PhaseSince)
			if err != nil {
				t.Fatalf("cp-1's phase since %q: %v", p.PhaseSince, err)
			}
			recorded := transitionAt(t, rec, "upgrading-control-plane-cp-1-failed")
			t.Logf("cp-1's kubelet-config phase began %s; its failure was recorded %s later", began.Format(time.TimeOnly), recorded.Sub(began))
			if recorded.Sub(began) > 30*time.Second {
				t.Errorf("cp-1's failure was recorded %s after its phase began, more than 30s", recorded.Sub(began))
			}
			if !strings.Contains(rec.Reason, "node cp-1") || !strings.Contains(rec.Reason, "phase kubelet-config") {
				t.Errorf("the failure does not name cp-1 and its phase: %s", rec.Reason)
			}
			if p := rec.Agents.Progress("cp-1"); p.Outcome != upgradestate.NodeFailed || p.Phase != "kubelet-config" {
				t.Errorf("cp-1's progress: %+v", p)
			}
			if fi, err := os.Stat(filepath.Join(c.node(t, "cp-1").Root, "var", "lib", "kubelet", "config.yaml")); err != nil || fi.ModTime().Before(resumed) {
				t.Errorf("cp-1's kubelet config.yaml was not written again before the phase failed: %v", err)
			}
			c.wantUntouched(t, rec, untouched)
		}},
		{"resumed, cp-2's agent is SIGKILLed in its control-plane phase and started again: the step completes, never run twice at once", func(t *testing.T, c *agentUpgradeCluster) {
			c.fault(t, "cp-1", testcluster.FaultKubeletConfig, false)
			c.fault(t, "cp-1", testcluster.FaultKubeletRestart, true)
			wantExit(t, run(t, "kubectl", "kubeadmcfg", "upgrade-resume"), 0)
			c.waitPhase(t, "cp-2", "control-plane", 10*time.Minute)
			time.Sleep(3 * time.Second) // into kubeadm's control-plane phase
			root := c.node(t, "cp-2").Root
			if len(kubeadmsOf(root)) == 0 {
				t.Fatal("no kubeadm runs on cp-2 in its control-plane phase: killing its agent now would show nothing")
			}
			if r := c.kill(t, "cp-2", syscall.SIGKILL); r.code != -1 {
				t.Fatalf("cp-2's agent was not killed: %s", r)
			}
			// The kernel ends the agent's kubeadm with it: none runs for the
			// node while it has no agent.
			deadline := time.Now().Add(10 * time.Second)
			for len(kubeadmsOf(root)) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("kubeadm still runs on cp-2 10s after its agent was killed: %q", kubeadmsOf(root))
				}
				time.Sleep(100 * time.Millisecond)
			}
			c.startUpgradeAgent(t, "cp-2")
			c.waitReached(t, "upgraded-control-plane-cp-2", time.Now().Add(10*time.Minute))
			c.waitLog(t, "cp-2", "takes over from")
		}},
		{"cp-1's kubelet step fails: recorded by itself, and nothing goes on until upgrade-resume", func(t *testing.T, c *agentUpgradeCluster) {
			rec := c.waitHost(t, "cp-1", "upgrading-kubelet-failed", time.Now().Add(5*time.Minute))
			// A host's failure is the node's, beside the state's own reason.
			if p := rec.Agents.Progress("cp-1"); p.Outcome != upgradestate.NodeFailed || !strings.Contains(p.Message, "node cp-1: upgrading-kubelet: phase kubelet failed") {
				t.Errorf("cp-1's progress does not record its kubelet step's failure: %+v", p)
			}
			time.Sleep(5 * agentHeartbeat)
			rec = c.record(t)
			if h := rec.Hosts["cp-1"]; h.Status != "upgrading-kubelet-failed" {
				t.Errorf("cp-1's kubelet step moved on by itself: %+v", h)
			}
			if _, ok := rec.Hosts["cp-2"]; ok {
				t.Errorf("cp-2's kubelet step began after cp-1's failed: %+v", rec.Hosts["cp-2"])
			}
			node, err := c.client.CoreV1().Nodes().Get(context.Background(), "cp-2", metav1.GetOptions{})
			if err != nil || node.Status.NodeInfo.KubeletVersion != c.bins.Previous.Version {
				t.Errorf("cp-2's kubelet was upgraded after cp-1's failed: %s, %v", node.Status.NodeInfo.KubeletVersion, err)
			}
		}},
		{"with the causes fixed, upgrade-resume --wait completes the upgrade: exit 0, every append kept", func(t *testing.T, c *agentUpgradeCluster) {
			c.fault(t, "cp-1", testcluster.FaultKubeletRestart, false)
			wantEnded(t, runLong(t, 15*time.Minute, "kubectl", "kubeadmcfg", "upgrade-resume", "--wait", "--timeout", "12m"), 0)
			appends := w.stop(t)
			rec := c.record(t)
			if rec.State != upgradestate.Complete {
				t.Errorf("the upgrade ended in %s: %s", rec.State, rec.Reason)
			}
			doc := c.document(t)
			if !strings.Contains(doc, "kubernetesVersion: "+c.bins.Version) {
				t.Errorf("kubeadm-config does not say %s:\n%s", c.bins.Version, doc)
			}
			c.wantComponents(t, c.bins.Version)
			wantAppendsKept(t, appends, doc)
			t.Logf("states seen: %s", c.seenStates())
		}},
	})
}

// fault sets (on) or clears the harness's fault name on node.
func (c *agentUpgradeCluster) fault(t *testing.T, node, name string, on bool) {
	t.Helper()
	path := filepath.Join(c.node(t, node).FaultsDir, name)
	var err error
	if on {
		err = os.WriteFile(path, nil, 0o600)
	} else if err = os.Remove(path); os.IsNotExist(err) {
		err = nil
	}
	if err != nil {
		t.Fatal(err)
	}
}

// manifests fingerprints the static Pod manifests of nodes.
func (c *agentUpgradeCluster) manifests(t *testing.T, nodes ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range nodes {
		files, err := filepath.Glob(filepath.Join(c.node(t, name).ManifestsDir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("node %s has no manifests: %v", name, err)
		}
		h := sha256.New()
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
			h.Write(b)
		}
		out[name] = fmt.Sprintf("%x", h.Sum(nil))
	}
	return out
}

// wantUntouched checks that the nodes of before have the same manifests,
// run the previous release and have no step of the upgrade recorded.
func (c *agentUpgradeCluster) wantUntouched(t *testing.T, rec *upgradestate.Record, before map[string]string) {
	t.Helper()
	var nodes []string
	for name := range before {
		nodes = append(nodes, name)
	}
	now := c.manifests(t, nodes...)
	for _, name := range nodes {
		if now[name] != before[name] {
			t.Errorf("node %s's manifests changed", name)
		}
		if p := rec.Agents.Progress(name); p.Step != "" || p.Outcome != "" {
			t.Errorf("node %s took a step: %+v", name, p)
		}
	}
	c.wantNodeComponents(t, nodes, c.bins.Previous.Version)
}

// waitPhase waits until node's progress is in phase, and returns when the
// record says it began.
func (c *agentUpgradeCluster) waitPhase(t *testing.T, node, phase string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if rec := c.tryRecord(); rec != nil {
			if p := rec.Agents.Progress(node); p.Phase == phase && p.Outcome == upgradestate.NodeRunning {
				since, err := time.Parse(time.RFC3339, p.PhaseSince)
				if err != nil {
					t.Fatalf("%s's phase since %q: %v", node, p.PhaseSince, err)
				}
				return since
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s was not in phase %s within %s; states seen: %s", node, phase, within, c.seenStates())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor waits until the upgrade is in state, by deadline.
func (c *agentUpgradeCluster) waitFor(t *testing.T, state upgradestate.State, deadline time.Time) *upgradestate.Record {
	t.Helper()
	for {
		if rec := c.tryRecord(); rec != nil && rec.State == state {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upgrade is not in %s by %s; states seen: %s", state, deadline.Format(time.TimeOnly), c.seenStates())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitReached waits until the record's history shows the upgrade entered
// state, by deadline: a state the next node's agent leaves at once may
// never be seen as the current one.
func (c *agentUpgradeCluster) waitReached(t *testing.T, state upgradestate.State, deadline time.Time) *upgradestate.Record {
	t.Helper()
	for {
		if rec := c.tryRecord(); rec != nil && slices.ContainsFunc(rec.History, func(tr upgradestate.Transition) bool {
			return tr.To == string(state) && tr.Host == ""
		}) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upgrade did not reach %s by %s; states seen: %s", state, deadline.Format(time.TimeOnly), c.seenStates())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitHost waits until node's host status is status, by deadline.
func (c *agentUpgradeCluster) waitHost(t *testing.T, node string, status upgradestate.HostStatus, deadline time.Time) *upgradestate.Record {
	t.Helper()
	for {
		if rec := c.tryRecord(); rec != nil && rec.Hosts[node].Status == status {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s is not %s by %s; states seen: %s", node, status, deadline.Format(time.TimeOnly), c.seenStates())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// tryRecord is the upgrade record, nil when it cannot be read now.
func (c *agentUpgradeCluster) tryRecord() *upgradestate.Record {
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), upgradestate.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	rec, ok, err := upgradestate.FromConfigMap(cm)
	if err != nil || !ok {
		return nil
	}
	return rec
}

// wantMirrorPods waits a minute for node's control-plane mirror Pods to
// be Ready with version's images.
func (c *agentUpgradeCluster) wantMirrorPods(t *testing.T, node, version string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var wrong []string
		for _, comp := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			pod, err := c.client.CoreV1().Pods("kube-system").Get(context.Background(), comp+"-"+node, metav1.GetOptions{})
			switch {
			case err != nil:
				wrong = append(wrong, err.Error())
			case !strings.HasSuffix(pod.Spec.Containers[0].Image, ":"+version):
				wrong = append(wrong, pod.Name+" runs "+pod.Spec.Containers[0].Image)
			case !podReady(pod):
				wrong = append(wrong, pod.Name+" is not Ready")
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s is not healthy on %s: %s", node, version, strings.Join(wrong, "; "))
		}
		time.Sleep(time.Second)
	}
}

// kubeadmsOf lists the kubeadm processes running on the node whose root
// is root.
func kubeadmsOf(root string) []string {
	out, _ := exec.Command("pgrep", "-a", "-f", "kubeadm .*"+regexp.QuoteMeta(root)).Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		return strings.Split(s, "\n")
	}
	return nil
}

// transitionAt is when rec's history last entered state.
func transitionAt(t *testing.T, rec *upgradestate.Record, state upgradestate.State) time.Time {
	t.Helper()
	for i := len(rec.History) - 1; i >= 0; i-- {
		if tr := rec.History[i]; tr.To == string(state) && tr.Host == "" {
			at, err := time.Parse(time.RFC3339, tr.At)
			if err != nil {
				t.Fatalf("the transition to %s at %q: %v", state, tr.At, err)
			}
			return at
		}
	}
	t.Fatalf("the history never enters %s", state)
	return time.Time{}
}
