package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	wait    time.Duration // the agents' --wait

	mu     sync.Mutex
	states []string // every state (and host status) the record was seen in, in order
}

// startAgentUpgradeCluster starts the nodes at the previous release and
// an agent on each, whose --wait (the time a component has to come up,
// kubeadm's upgradeManifests timeout) is wait.
func startAgentUpgradeCluster(t *testing.T, wait time.Duration) *agentUpgradeCluster {
	t.Helper()
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	c := &agentUpgradeCluster{agentCluster: startAgentNodesWith(t, testcluster.LocalOptions{Nodes: 3, Etcd: testcluster.EtcdStacked,
		KubernetesVersion: bins.Previous.Version}), bins: bins, wait: wait}
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
	for _, name := range c.names() {
		c.waitReady(t, name)
	}
	return c
}

// waitReady waits a minute for node name's agent to be alive and to
// publish what upgrade-apply's preflight reads: the kubeadm versions it
// finds and its etcd member's health.
func (c *agentUpgradeCluster) waitReady(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st, alive := c.nodeState(t, name)
		if alive && len(st.KubeadmVersions) > 0 && st.Etcd != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent of %s has not published its kubeadm versions and etcd health a minute after it started: %+v", name, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startUpgradeAgent runs node name's agent with the node flags of an
// upgrade: its kubeadm of each release, its kubelet restart command, its
// kubelet's configuration, and SystemVerification ignored (a node's root
// has no /proc, /sys or /boot for it to check; see upgradeIgnored). It
// acts as the DaemonSet's agent of the node, under deploy/agent-policy.yaml.
func (c *agentUpgradeCluster) startUpgradeAgent(t *testing.T, name string) *agentProcess {
	t.Helper()
	n := c.node(t, name)
	args := append([]string{"kubeadmcfg", "agent", "--heartbeat-interval", agentHeartbeat.String(), "--wait", c.wait.String(),
		"--stop-grace", "20s", "--kubeconfig", c.Kubeconfig, "--metrics-bind-address", metricsAddr(name)}, daemonSetIdentity(name)...)
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

func (c *agentUpgradeCluster) seenStates() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.states, " | ")
}

func TestUpgradeByAgents(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	c := startAgentUpgradeCluster(t, 2*time.Minute)
	runSteps(t, c, []step[*agentUpgradeCluster]{
		{"cp-0's agent runs as the systemd unit with its drop-in for upgrades, in the unit's sandbox, under the agents' policy", func(t *testing.T, c *agentUpgradeCluster) {
			c.wantPolicyInForce(t, "cp-1", "cp-0")
			c.wantUpgradeSandbox(t, "cp-0")
			if r := c.kill(t, "cp-0", syscall.SIGTERM); r.code != 0 {
				t.Fatalf("cp-0's agent did not stop cleanly: %s", r)
			}
			c.startUnitUpgradeAgent(t, "cp-0")
		}},
		{"upgrade-apply --wait: the agents upgrade every node, one at a time, in the plan's order, while a writer appends to kubeadm-config", func(t *testing.T, c *agentUpgradeCluster) {
			ctx := context.Background()
			// kubeadm uploads the kubelet's configuration as it reads it from
			// the cluster, with its release's defaults: the same bytes
			// (no new resourceVersion) unless a default is missing. One
			// is taken out, for the upgrade's upload to put back.
			before, err := c.client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubelet-config", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			const defaulted = "cgroupDriver: systemd\n"
			if !strings.Contains(before.Data["kubelet"], defaulted) {
				t.Fatalf("the kubelet-config ConfigMap has no %q:\n%s", defaulted, before.Data["kubelet"])
			}
			before.Data["kubelet"] = strings.Replace(before.Data["kubelet"], defaulted, "", 1)
			if before, err = c.client.CoreV1().ConfigMaps("kube-system").Update(ctx, before, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Setenv("KUBECONFIG", c.Kubeconfig)
			w := startAppender(t, "during-upgrade")
			w.waitFor(t, 3)
			start := time.Now()
			r := runLong(t, 20*time.Minute, "kubectl", "kubeadmcfg", "upgrade-apply", c.bins.Version, "--wait", "--timeout", "15m")
			appends := w.stop(t)
			t.Logf("upgrade-apply --wait took %s; states seen: %s", time.Since(start).Round(time.Second), c.seenStates())
			wantEnded(t, r, 0)
			rec := c.record(t)
			if rec.State != upgradestate.Complete {
				t.Errorf("the upgrade ended in %s: %s", rec.State, rec.Reason)
			}
			for _, n := range rec.Agents.Nodes {
				if n.Outcome != upgradestate.NodeDone {
					t.Errorf("node %s: %+v", n.Node, n)
				}
			}
			wantPlanOrder(t, rec, c.names())
			for _, name := range c.names() {
				node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil || node.Status.NodeInfo.KubeletVersion != c.bins.Version {
					t.Errorf("node %s: kubelet %s, %v", name, node.Status.NodeInfo.KubeletVersion, err)
				}
			}
			doc := c.document(t)
			if !strings.Contains(doc, "kubernetesVersion: "+c.bins.Version) {
				t.Errorf("kubeadm-config does not say %s:\n%s", c.bins.Version, doc)
			}
			after, err := c.client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubelet-config", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion == before.ResourceVersion || !strings.Contains(after.Data["kubelet"], defaulted) {
				t.Errorf("the kubelet-config ConfigMap was not uploaded by kubeadm %s (resourceVersion %s before, %s after):\n%s", c.bins.Version, before.ResourceVersion, after.ResourceVersion, after.Data["kubelet"])
			}
			c.wantComponents(t, c.bins.Version)
			wantAppendsKept(t, appends, doc)
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

// record reads the upgrade record.
func (c *agentUpgradeCluster) record(t *testing.T) *upgradestate.Record {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), upgradestate.DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := upgradestate.FromConfigMap(cm)
	if err != nil || !ok {
		t.Fatalf("the upgrade record: %v (recorded: %t)", err, ok)
	}
	return rec
}

// document is kubeadm-config's ClusterConfiguration.
func (c *agentUpgradeCluster) document(t *testing.T) string {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["ClusterConfiguration"]
}

// components lists, for each of this test's nodes, the command line of
// each running control-plane process (etcd included), as pgrep shows it.
func (c *agentUpgradeCluster) components(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, name := range c.names() {
		root := c.node(t, name).Root
		for _, comp := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			ps, _ := exec.Command("pgrep", "-a", "-f", "/"+comp+" .*"+regexp.QuoteMeta(root+"/")).Output()
			lines := strings.Split(strings.TrimSpace(string(ps)), "\n")
			if len(lines) != 1 || lines[0] == "" {
				t.Errorf("node %s runs %d %s processes: %q", name, len(lines), comp, lines)
				continue
			}
			out[name] = append(out[name], lines[0])
		}
	}
	return out
}

// wantComponents checks that every control-plane process of every node
// runs version's binary (etcd: the etcd of version's kubeadm).
func (c *agentUpgradeCluster) wantComponents(t *testing.T, version string) {
	t.Helper()
	c.wantNodeComponents(t, c.names(), version)
}

// wantNodeComponents is wantComponents for some nodes.
func (c *agentUpgradeCluster) wantNodeComponents(t *testing.T, nodes []string, version string) {
	t.Helper()
	etcd, kube := c.bins.Etcd, c.bins.APIServer
	if version == c.bins.Previous.Version {
		etcd, kube = c.bins.Previous.Etcd, c.bins.Previous.APIServer
	}
	all := c.components(t)
	for _, name := range nodes {
		for _, line := range all[name] {
			want := filepath.Dir(kube) + "/"
			if strings.Contains(line, "/etcd ") {
				want = etcd + " "
			}
			if !strings.Contains(line, want) {
				t.Errorf("node %s runs a component not of %s (%s): %s", name, version, want, line)
			}
		}
	}
}

// wantPlanOrder checks that the record's history follows the plan from
// upgrade-started to upgrade-complete with no failure, each node's step
// after the previous node's: the control-plane steps, then the kubelets'
// host steps, node by node.
func wantPlanOrder(t *testing.T, rec *upgradestate.Record, nodes []string) {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, "upgrading-control-plane-"+n, "upgraded-control-plane-"+n)
	}
	want = append(want, "upgrading-kubelets")
	for _, n := range nodes {
		want = append(want, n+":upgrading-kubelet", n+":upgraded-kubelet")
	}
	want = append(want, string(upgradestate.Complete))
	var got []string
	for _, tr := range rec.History {
		switch {
		case tr.Host != "":
			got = append(got, tr.Host+":"+tr.To)
		case tr.To != string(upgradestate.Started):
			got = append(got, tr.To)
		}
	}
	if i := slices.Index(got, want[0]); i > 0 {
		got = got[i:] // the history before the upgrade's start
	}
	if !slices.Equal(got, want) {
		t.Errorf("the recorded states:\n  %s\nwant, in the plan's order:\n  %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

// wantAppendsKept checks a writer's appends against the final document:
// every one that exited 0 is in it once, and its failures, if any, span no
// longer than one API server restart.
func wantAppendsKept(t *testing.T, appends []appended, doc string) {
	t.Helper()
	var failedFrom, failedTo time.Time
	longest, failed := time.Duration(0), 0
	for _, a := range appends {
		if a.r.code != 0 {
			failed++
			if failedFrom.IsZero() {
				failedFrom = a.start
			}
			failedTo = a.end
			longest = max(longest, failedTo.Sub(failedFrom))
			continue
		}
		failedFrom = time.Time{}
		if n := countSAN(doc, a.san); n != 1 {
			t.Errorf("append %s exited 0 and is in kubeadm-config %d times, want once", a.san, n)
		}
	}
	t.Logf("%d appends, %d failed, the longest run of failures %s", len(appends), failed, longest.Round(time.Millisecond))
	if longest > apiServerRestart {
		t.Errorf("appends failed for %s in a row, longer than an API server restart (%s)", longest.Round(time.Millisecond), apiServerRestart)
	}
	if len(appends) < 10 {
		t.Errorf("the writer made %d appends: too few to show anything", len(appends))
	}
}

// apiServerRestart bounds one API server restart on a local node: the
// component's stop, its start and /readyz (kubeadm's upgrade waits for
// each, measured 5-8s here).
const apiServerRestart = 30 * time.Second
