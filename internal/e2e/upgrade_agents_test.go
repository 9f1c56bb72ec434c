package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// The agents carry a Kubernetes upgrade out: three local control-plane
// nodes with a stacked etcd at the previous release, an agent on each as a
// plain process with the node flags of an upgrade, and the real kubeadm
// of the target release, phase by phase, on each node's root.

// upgradeCluster is the agents' control plane at the previous release.
type agentUpgradeCluster struct {
	*agentCluster
	bins    testcluster.Binaries
	upgrade *engine.Engine

	mu     sync.Mutex
	states []string // every state (and host status) the record was seen in, in order
}

func startAgentUpgradeCluster(t *testing.T) *agentUpgradeCluster {
	t.Helper()
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	c := &agentUpgradeCluster{agentCluster: startAgentNodesWith(t, testcluster.LocalOptions{Nodes: 3, Etcd: testcluster.EtcdStacked,
		KubernetesVersion: bins.Previous.Version}), bins: bins}
	c.upgrade = engine.New(c.client, engine.Target{Namespace: "kube-system", Name: upgradestate.DefaultConfigMap}, engine.Options{CreateIfMissing: true})
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.upgrade.Follow(fctx, func(cm *corev1.ConfigMap) {
			if cm == nil {
				return
			}
			if rec, ok, err := upgradestate.FromConfigMap(cm); err == nil && ok {
				c.mu.Lock()
				seen := string(rec.State)
				for _, n := range c.names() {
					if h, ok := rec.Hosts[n]; ok {
						seen += " " + n + "=" + string(h.Status)
					}
				}
				if len(c.states) == 0 || c.states[len(c.states)-1] != seen {
					c.states = append(c.states, seen)
				}
				c.mu.Unlock()
			}
		}, nil)
	}()
	t.Cleanup(func() { stop(); <-done })
	c.applyAgentRights(t)
	for _, name := range c.names() {
		c.startUpgradeAgent(t, name)
	}
	return c
}

// startUpgradeAgent runs node name's agent with the node flags of an
// upgrade: its kubeadm of each release, its kubelet restart command, its
// kubelet's configuration, and SystemVerification ignored (a node's root
// has no /proc, /sys or /boot for it to check; see upgradeIgnored). It
// acts as the DaemonSet's agent of the node, under hack/agent-policy.yaml.
func (c *agentUpgradeCluster) startUpgradeAgent(t *testing.T, name string) *agentProcess {
	t.Helper()
	n := c.node(t, name)
	args := append([]string{"kubeadmcfg", "agent", "--heartbeat-interval", agentHeartbeat.String(), "--wait", "2m",
		"--stop-grace", "20s", "--kubeconfig", c.Kubeconfig}, daemonSetIdentity(name)...)
	args = append(args, "--cert-dir", filepath.Join(n.Root, "etc", "kubernetes", "pki"),
		"--kubeadm-template", n.KubeadmTemplate, "--kubelet-restart-command", n.KubeletRestart,
		"--kubelet-config", filepath.Join(n.Root, "var", "lib", "kubelet", "config.yaml"),
		"--ignore-preflight-errors", strings.Join(upgradeIgnored, ","))
	args = append(args, n.flags()...)
	cmd := exec.Command("kubectl", args...)
	// The agent renders with the node's kubeadm of the document's
	// release, through the template, which runs it in the node's root:
	// what it hands kubeadm must be under the root.
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(n.Root, "tmp"))
	return c.runAgent(t, name, cmd)
}

// apply starts the upgrade to the current release, carried out by the
// agents, as upgrade-apply writes it.
func (c *agentUpgradeCluster) apply(t *testing.T) {
	t.Helper()
	plan, err := upgradestate.Builtin("kubeadm")
	if err != nil {
		t.Fatal(err)
	}
	if plan, err = plan.Instantiate(c.names()); err != nil {
		t.Fatal(err)
	}
	if err := plan.AssignNodes(c.names()); err != nil {
		t.Fatal(err)
	}
	to := c.bins.Version
	_, err = c.upgrade.Update(context.Background(), func(cm *corev1.ConfigMap) (bool, error) {
		ch, err := upgradestate.Apply(cm, func(rec *upgradestate.Record) (*upgradestate.Record, bool, error) {
			clock := upgradestate.Clock{Now: time.Now(), By: "e2e"}
			next, err := upgradestate.Start(rec, plan, clock, c.bins.Previous.Version, to, "upgrade-apply "+to)
			if err != nil {
				return nil, false, err
			}
			next.Agents = upgradestate.NewAgents(clock, to, plan)
			return next, true, nil
		})
		return ch.Changed, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitState waits until the upgrade is in state, and fails the test on a
// failed state.
func (c *agentUpgradeCluster) waitState(t *testing.T, state upgradestate.State, within time.Duration) *upgradestate.Record {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), upgradestate.DefaultConfigMap, metav1.GetOptions{})
		if err == nil {
			rec, _, err := upgradestate.FromConfigMap(cm)
			if err == nil && rec.State == state {
				return rec
			}
			if err == nil && rec.PlanOf().Failed(rec.State) && !rec.PlanOf().Failed(state) {
				t.Fatalf("the upgrade failed: %s: %s\nstates seen: %s", rec.State, rec.Reason, c.seenStates())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upgrade is not in %s after %s; states seen: %s", state, within, c.seenStates())
		}
		time.Sleep(time.Second)
	}
}

func (c *agentUpgradeCluster) seenStates() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.states, " | ")
}

func TestUpgradeByAgents(t *testing.T) {
	if !inOwnNetns(t, 40*time.Minute) {
		return
	}
	c := startAgentUpgradeCluster(t)
	runSteps(t, c, []step[*agentUpgradeCluster]{
		{"cp-0's agent runs as the systemd unit with its drop-in for upgrades, in the unit's sandbox, under the agents' policy", func(t *testing.T, c *agentUpgradeCluster) {
			c.wantPolicyInForce(t, "cp-1", "cp-0")
			c.wantUpgradeSandbox(t, "cp-0")
			if r := c.kill(t, "cp-0", syscall.SIGTERM); r.code != 0 {
				t.Fatalf("cp-0's agent did not stop cleanly: %s", r)
			}
			c.startUnitUpgradeAgent(t, "cp-0")
		}},
		{"the agents upgrade every node, one at a time, in the plan's order", func(t *testing.T, c *agentUpgradeCluster) {
			start := time.Now()
			c.apply(t)
			rec := c.waitState(t, upgradestate.Complete, 15*time.Minute)
			t.Logf("the upgrade took %s; states seen: %s", time.Since(start).Round(time.Second), c.seenStates())
			for _, n := range rec.Agents.Nodes {
				if n.Outcome != upgradestate.NodeDone {
					t.Errorf("node %s: %+v", n.Node, n)
				}
			}
			for _, name := range c.names() {
				node, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
				if err != nil || node.Status.NodeInfo.KubeletVersion != c.bins.Version {
					t.Errorf("node %s: kubelet %s, %v", name, node.Status.NodeInfo.KubeletVersion, err)
				}
			}
			cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
			if err != nil || !strings.Contains(cm.Data["ClusterConfiguration"], "kubernetesVersion: "+c.bins.Version) {
				t.Errorf("kubeadm-config: %v\n%s", err, cm.Data["ClusterConfiguration"])
			}
			for _, line := range c.apiServers(t) {
				if !strings.Contains(line, fmt.Sprintf("kubernetes-%s/kube-apiserver", c.bins.Version)) {
					t.Errorf("a kube-apiserver of another release runs: %s", line)
				}
			}
			// cp-0 ran kubeadm upgrade apply in the sandbox of the unit
			// with its drop-in, every phase but upload-config's own
			// document (the agent writes kubeadm-config itself).
			c.wantUnitPhases(t, "cp-0", "apply", []string{"preflight", "control-plane", "upload-config kubelet", "kubelet-config",
				"bootstrap-token", "addon all", "post-upgrade"})
			for _, name := range c.names() {
				if log := c.agents[name].stderrString(); strings.Contains(log, "forbidden") || strings.Contains(log, "NoHeartbeat") {
					t.Errorf("the agent of %s was refused under the agents' policy:\n%s", name, log)
				}
			}
		}},
	})
}
