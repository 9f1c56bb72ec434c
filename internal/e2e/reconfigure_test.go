package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// reconfigure on two control-plane nodes: two static Pod runners, two
// kube-apiservers (and their controller-managers and schedulers) on one
// etcd, behind a load balancer on the controlPlaneEndpoint. kubeadm needs
// real node addresses, so the test runs in a network namespace it creates
// (testcluster.ReexecInNetns); every connection stays in there.

// The addresses on the namespace's loopback device.
const (
	lbAddress    = "192.0.2.10"
	nodeAAddress = "192.0.2.11"
	nodeBAddress = "192.0.2.12"
)

func TestReconfigure(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	cp := startNodes(t)
	a, b := cp.node(t, "node-a"), cp.node(t, "node-b")

	t.Run("nothing to change restarts nothing", func(t *testing.T) {
		for _, n := range []*testNode{a, b} {
			r := n.reconfigure(t, "-o", "json")
			wantExit(t, r, 0)
			res := decodeReconfigure(t, r)
			if res.Changed || res.LastKnownGood == "" {
				t.Fatalf("%s: want unchanged and recorded as the last known good: %s", n.Name, r)
			}
			for _, c := range res.Components {
				if c.Changed || c.Replaced {
					t.Errorf("%s: %s changed: %s", n.Name, c.Name, r)
				}
			}
		}
		cp.wantUpdates(t, map[string]int{})
	})
	if t.Failed() {
		return
	}

	t.Run("deploy/rbac.yaml is all it needs", func(t *testing.T) {
		// An operator of group kubeadmcfg:operators, with a certificate from
		// kubeadm kubeconfig user.
		out, err := cp.Kubeadm(context.Background(), "kubeconfig", "user", "--config", filepath.Join(a.Root, "kubeadm-certs.yaml"),
			"--client-name", "operator", "--org", "kubeadmcfg:operators")
		if err != nil {
			t.Fatal(err)
		}
		operator := filepath.Join(cp.dir, "operator.conf")
		if err := os.WriteFile(operator, out, 0o600); err != nil {
			t.Fatal(err)
		}
		r := a.reconfigureAs(t, operator)
		wantExit(t, r, 6)
		if !strings.Contains(r.stderr, `cannot get resource "configmaps"`) {
			t.Errorf("the refusal does not name what is missing: %s", r)
		}
		admin := func(args ...string) {
			t.Helper()
			wantExit(t, runLong(t, time.Minute, "kubectl", append(args, "-n", "kube-system", "--kubeconfig", cp.Kubeconfig)...), 0)
		}
		admin("apply", "-f", "../../deploy/rbac.yaml")
		// The Role kubeadmcfg-reconfigure is all it needs: the
		// ClusterConfiguration, the upgrade record and the mirror Pods.
		admin("delete", "rolebinding", "kubeadmcfg")
		r = a.reconfigureAs(t, operator, "--dry-run")
		wantExit(t, r, 0)
		r = a.reconfigureAs(t, operator)
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "now its last known good") {
			t.Errorf("the healthy node was not recorded as good: %s", r)
		}
		// Without the reconfigure Role the mirror Pods cannot be read.
		admin("apply", "-f", "../../deploy/rbac.yaml")
		admin("delete", "rolebinding", "kubeadmcfg-reconfigure")
		r = a.reconfigureAs(t, operator)
		wantExit(t, r, 6)
		if !strings.Contains(r.stderr, `cannot get resource "pods"`) {
			t.Errorf("the refusal does not name what is missing: %s", r)
		}
	})
	if t.Failed() {
		return
	}

	// What reconfigure refuses or leaves alone (reconfigure_guard_test.go).
	t.Run("a version change is refused", func(t *testing.T) { testVersionChangeRefused(t, cp, a) })
	t.Run("an upgrade in progress is refused", func(t *testing.T) { testUpgradeInProgressRefused(t, cp, a) })
	t.Run("etcd is planned with its running initial cluster, or left alone", func(t *testing.T) { testEtcdCompared(t, cp, a) })
	cp.wantUpdates(t, map[string]int{})
	if t.Failed() {
		return
	}
	var good string // the ClusterConfiguration every node last ran healthy

	t.Run("a valid change reaches both kube-apiservers, one node after the other", func(t *testing.T) {
		if refused := cp.oneAfterAnother(t, "--set", "apiServer.extraArgs.audit-log-maxbackup=7",
			"--set", "controllerManager.extraArgs.terminated-pod-gc-threshold=500"); refused != "" {
			t.Fatalf("%s refused the change", refused)
		}
		for _, n := range []*testNode{a, b} {
			if line := commandLine(t, n, "kube-apiserver"); !strings.Contains(line, " --audit-log-maxbackup=7") {
				t.Errorf("%s: kube-apiserver runs without the new flag: %s", n.Name, line)
			}
			if line := commandLine(t, n, "kube-controller-manager"); !strings.Contains(line, " --terminated-pod-gc-threshold=500") {
				t.Errorf("%s: kube-controller-manager runs without the new flag: %s", n.Name, line)
			}
			// One at a time: the controller-manager's manifest was replaced
			// only once the new API server answered.
			api, kcm := n.Runner.Stats("kube-apiserver"), n.Runner.Stats("kube-controller-manager")
			if !kcm.Updated.After(api.ReadySince) || !api.ReadySince.After(api.Updated) {
				t.Errorf("%s: kube-apiserver replaced at %s and ready at %s, kube-controller-manager replaced at %s: not one at a time",
					n.Name, api.Updated, api.ReadySince, kcm.Updated)
			}
		}
		// Each changed component restarted once, the scheduler never.
		cp.wantUpdates(t, map[string]int{"node-a/kube-apiserver": 1, "node-a/kube-controller-manager": 1,
			"node-b/kube-apiserver": 1, "node-b/kube-controller-manager": 1})
		cp.wantReady(t)
		good = cp.liveDocument(t)
		if strings.Contains(good, nodeAAddress) || strings.Contains(good, nodeBAddress) || strings.Contains(good, "InitConfiguration") {
			t.Errorf("a node's own values reached the ConfigMap:\n%s", good)
		}
		// The manifests are exactly what kubeadm writes for the same file.
		for _, n := range []*testNode{a, b} {
			cp.wantKubeadmManifests(t, n, good)
			if lg := n.lastKnownGood(t); lg != good {
				t.Errorf("%s: the last known good is not the configuration applied:\n%s", n.Name, lg)
			}
		}
	})
	if t.Failed() {
		return
	}

	t.Run("a flag kube-apiserver refuses is rolled back on the first node, and the ConfigMap restored", func(t *testing.T) {
		before := map[string]map[string][]byte{"node-a": readManifests(t, a), "node-b": readManifests(t, b)}
		if refused := cp.oneAfterAnother(t, "--set", "apiServer.extraArgs.no-such-flag=1"); refused != "node-a" {
			t.Fatalf("want node-a to refuse the change (exit 8), got %q", refused)
		}
		if got := cp.liveDocument(t); got != good {
			t.Errorf("the ConfigMap is not back on the last valid configuration:\n%s", got)
		}
		for _, n := range []*testNode{a, b} {
			if diff := cmpManifests(before[n.Name], readManifests(t, n)); diff != "" {
				t.Errorf("%s: the manifests are not the previous ones: %s", n.Name, diff)
			}
			if lg := n.lastKnownGood(t); lg != good {
				t.Errorf("%s: the failed run moved the last known good", n.Name)
			}
		}
		// node-a's API server went to the bad manifest and back; nothing
		// else restarted, and node-b was never touched.
		cp.wantUpdates(t, map[string]int{"node-a/kube-apiserver": 3, "node-a/kube-controller-manager": 1,
			"node-b/kube-apiserver": 1, "node-b/kube-controller-manager": 1})
		cp.wantReady(t)
	})
	if t.Failed() {
		return
	}

	t.Run("a component killed during the rollback exits 9 naming it", func(t *testing.T) {
		backup := cp.patch(t, a, "--set", "apiServer.extraArgs.no-such-flag=1")
		updates := a.Runner.Stats("kube-apiserver").Updates
		// The rollback is the second manifest node-a's API server gets:
		// kill it as it starts, and keep it down.
		stop := make(chan struct{})
		held := make(chan bool, 1)
		go func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					held <- false
					return
				case <-tick.C:
					if a.Runner.Stats("kube-apiserver").Updates == updates+2 {
						a.Runner.Hold("kube-apiserver")
						held <- true
						return
					}
				}
			}
		}()
		r := a.reconfigure(t, "-o", "json", "--wait", "30s")
		close(stop)
		if !<-held {
			t.Errorf("the rollback never reached the runner")
		}
		a.Runner.Release("kube-apiserver")
		if r.code != 9 {
			t.Fatalf("want exit 9, got %s", r)
		}
		if !strings.Contains(r.stderr, "the rollback failed: kube-apiserver may be down") {
			t.Errorf("the error does not name the component: %s", r.stderr)
		}
		if res := decodeReconfigure(t, r); res.ExitCode != 9 || res.Components[0].RolledBack {
			t.Errorf("result: %+v", res)
		}
		cp.restore(t, a, backup)
		cp.wantReady(t)
		if diff := cmpManifests(cp.kubeadmManifests(t, a, good), readManifests(t, a)); diff != "" {
			t.Errorf("node-a: the manifests are not the previous ones: %s", diff)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("--no-rollback leaves the bad manifest, --latest-good brings the last good back", func(t *testing.T) {
		backup := cp.patch(t, a, "--set", "apiServer.extraArgs.no-such-flag=1")
		r := a.reconfigure(t, "-o", "json", "--no-rollback")
		if r.code != 1 || !strings.Contains(r.stderr, "not rolled back, as asked: the new manifests of kube-apiserver stay in place") {
			t.Fatalf("want exit 1, not rolled back, got %s", r)
		}
		if line := a.manifest(t, "kube-apiserver"); !strings.Contains(line, "--no-such-flag=1") {
			t.Fatalf("the bad manifest is not in place")
		}
		r = a.reconfigure(t, "--latest-good")
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "reconfigured, healthy after") {
			t.Errorf("kube-apiserver was not reconfigured: %s", r)
		}
		if diff := cmpManifests(cp.kubeadmManifests(t, a, good), readManifests(t, a)); diff != "" {
			t.Errorf("node-a is not back on its last known good: %s", diff)
		}
		cp.restore(t, a, backup)
		cp.wantReady(t)
		// Over the whole test only node-a's API server went back and forth;
		// every other component changed once (the valid change) or never.
		cp.wantUpdates(t, map[string]int{"node-a/kube-apiserver": 7, "node-a/kube-controller-manager": 1,
			"node-b/kube-apiserver": 1, "node-b/kube-controller-manager": 1})
	})
}

// controlPlane is the two-node control plane of the test.
type controlPlane struct {
	*testcluster.Nodes
	dir   string
	nodes map[string]*testNode
}

// testNode is one node and how the test runs the plugin "on" it.
type testNode struct {
	*testcluster.Node
	cp      *controlPlane
	backups string
}

func startNodes(t *testing.T) *controlPlane {
	t.Helper()
	if err := testcluster.SetUpLoopback(lbAddress, nodeAAddress, nodeBAddress); err != nil {
		t.Fatal(err)
	}
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	// Kept when the test fails: the components' logs are in there.
	dir, err := os.MkdirTemp("", "kubeadmcfg-reconfigure-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	nodes, err := testcluster.StartNodes(ctx, bins, testcluster.NodesOptions{
		Dir:      filepath.Join(dir, "cluster"),
		Endpoint: lbAddress + ":8443",
		Nodes: []testcluster.NodeSpec{
			{Name: "node-a", Address: nodeAAddress, BindPort: 6443},
			// node-b's patches move its controller-manager and scheduler to
			// ports of their own: both nodes share one network namespace,
			// where a real node has its own. Being kubeadm patches, they
			// also prove that reconfigure renders with the node's patches:
			// without them node-b's components would not start.
			{Name: "node-b", Address: nodeBAddress, BindPort: 6444, Patches: testcluster.NodePatches(1)},
		},
		// A kube-apiserver draining its watches takes the kubelet's whole
		// 30s grace period; the test has no use for the wait.
		Grace: 5 * time.Second,
		Log:   t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Stop)
	t.Logf("two control-plane nodes up in %s", time.Since(start).Round(time.Second))
	cp := &controlPlane{Nodes: nodes, dir: dir, nodes: map[string]*testNode{}}
	for _, n := range nodes.Nodes {
		cp.nodes[n.Name] = &testNode{Node: n, cp: cp, backups: filepath.Join(dir, "backups-"+n.Name)}
	}
	return cp
}

func (cp *controlPlane) node(t *testing.T, name string) *testNode {
	t.Helper()
	n, ok := cp.nodes[name]
	if !ok {
		t.Fatalf("no node %s", name)
	}
	return n
}

// flags are the plugin flags that stand for "running on this node": the
// node's name, its manifests directory and patches, its backups, the
// kubeadm to render with, and the cluster's kubeconfig.
func (n *testNode) flags() []string {
	f := []string{"--node-name", n.Name, "--manifests-dir", n.ManifestsDir, "--kubeadm", n.cp.Bins.Kubeadm,
		"--backup-dir", n.backups}
	if n.PatchesDir != "" {
		f = append(f, "--patches", n.PatchesDir)
	}
	return f
}

// reconfigure runs `kubectl kubeadmcfg reconfigure` on the node.
func (n *testNode) reconfigure(t *testing.T, args ...string) result {
	t.Helper()
	return n.reconfigureAs(t, n.cp.Kubeconfig, args...)
}

// reconfigureAs runs it with another kubeconfig.
func (n *testNode) reconfigureAs(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	full := append(append([]string{"kubeadmcfg", "reconfigure"}, args...), n.flags()...)
	return runLong(t, 5*time.Minute, "kubectl", append(full, "--kubeconfig", kubeconfig)...)
}

// reconfigureResult is the part of reconfigure -o json the test reads.
type reconfigureResult struct {
	Node          string `json:"node"`
	Backup        string `json:"backup"`
	Changed       bool   `json:"changed"`
	LastKnownGood string `json:"lastKnownGood"`
	ExitCode      int    `json:"exitCode"`
	Error         string `json:"error"`
	Components    []struct {
		Name       string `json:"name"`
		Changed    bool   `json:"changed"`
		Replaced   bool   `json:"replaced"`
		RolledBack bool   `json:"rolledBack"`
		Backup     string `json:"backup"`
	} `json:"components"`
}

func decodeReconfigure(t *testing.T, r result) reconfigureResult {
	t.Helper()
	var res reconfigureResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("reconfigure -o json: %v: %s", err, r)
	}
	return res
}

// wantUpdates checks how many times each node's runner picked up a new
// manifest per component ("node-a/kube-apiserver": 2); components not named
// must have none: they were never restarted for a new manifest.
func (cp *controlPlane) wantUpdates(t *testing.T, want map[string]int) {
	t.Helper()
	for _, n := range cp.Nodes.Nodes {
		for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			key := n.Name + "/" + c
			if got := n.Runner.Stats(c).Updates; got != want[key] {
				t.Errorf("%s: %d new manifests picked up, want %d", key, got, want[key])
			}
		}
	}
}

// commandLine is the running process's command line.
func commandLine(t *testing.T, n *testNode, component string) string {
	t.Helper()
	st := n.Runner.Stats(component)
	if !st.Running {
		t.Fatalf("%s: %s is not running", n.Name, component)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.Pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), "\x00", " ")
}

// liveDocument reads the ClusterConfiguration in kube-system/kubeadm-config.
func (cp *controlPlane) liveDocument(t *testing.T) string {
	t.Helper()
	client, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["ClusterConfiguration"]
}

// wantReady waits until every component of both nodes is Ready again.
func (cp *controlPlane) wantReady(t *testing.T) {
	t.Helper()
	if err := cp.WaitReady(context.Background(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// oneAfterAnother changes the ConfigMap as an operator without the rollout
// would: patched once (from node-a), then reconfigure on node-a and node-b
// in turn, stopping at the first node that refuses the change (exit 8),
// after which the ConfigMap is restored from the backup the patch took. It
// returns the node that refused, "" when none did. (More than one node is
// the rollout's, from the API: docs/rollout.md, TestRolloutOnAgents.)
func (cp *controlPlane) oneAfterAnother(t *testing.T, patch ...string) (refused string) {
	t.Helper()
	a := cp.node(t, "node-a")
	backup := cp.patch(t, a, patch...)
	for _, n := range []*testNode{a, cp.node(t, "node-b")} {
		r := n.reconfigure(t, "--wait", "90s")
		t.Logf("reconfigure %s: %s", n.Name, r)
		switch r.code {
		case 0:
		case 8:
			cp.restore(t, a, backup)
			return n.Name
		default:
			t.Fatalf("reconfigure %s: want exit 0 or 8, got %s", n.Name, r)
		}
	}
	return ""
}

// patch changes the ConfigMap from node n and returns the backup it took.
func (cp *controlPlane) patch(t *testing.T, n *testNode, args ...string) string {
	t.Helper()
	full := append(append([]string{"kubeadmcfg", "patch", "-o", "jsonpath={.backup}", "--backup-dir", n.backups}, args...),
		"--kubeconfig", cp.Kubeconfig)
	r := runLong(t, time.Minute, "kubectl", full...)
	wantExit(t, r, 0)
	if r.stdout == "" {
		t.Fatalf("the patch took no backup: %s", r)
	}
	return r.stdout
}

// restore puts the backup back in the ConfigMap from node n.
func (cp *controlPlane) restore(t *testing.T, n *testNode, backup string) {
	t.Helper()
	r := runLong(t, time.Minute, "kubectl", "kubeadmcfg", "restore", filepath.Base(backup), "--backup-dir", n.backups, "--kubeconfig", cp.Kubeconfig)
	wantExit(t, r, 0)
}

// lastKnownGood is the document of the node's last known good, as backup
// list shows it.
func (n *testNode) lastKnownGood(t *testing.T) string {
	t.Helper()
	found := ""
	for _, b := range backups(t, n.backups) {
		nodes, _ := b["lastKnownGoodOf"].([]any)
		for _, node := range nodes {
			if node == n.Name {
				if found != "" {
					t.Fatalf("%s has two last known good backups", n.Name)
				}
				found = string(stripHeader(t, b["path"].(string)))
			}
		}
	}
	if found == "" {
		t.Fatalf("%s has no last known good", n.Name)
	}
	return found
}

// manifest reads one of the node's manifests.
func (n *testNode) manifest(t *testing.T, component string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.ManifestsDir, component+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readManifests reads the node's manifests directory (dot-files too).
func readManifests(t *testing.T, n *testNode) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(n.ManifestsDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.Name() == ".kubeadmcfg-reconfigure.lock" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(n.ManifestsDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = data
	}
	return out
}

// kubeadmManifests is what `kubeadm init phase control-plane all` writes
// for clusterConfig on node n.
func (cp *controlPlane) kubeadmManifests(t *testing.T, n *testNode, clusterConfig string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "kubeadm.yaml")
	if err := os.WriteFile(file, []byte(n.ConfigFile(clusterConfig)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "manifests")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := testcluster.RenderManifests(context.Background(), cp.Bins.Kubeadm, file, out); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

// wantKubeadmManifests checks that the node's manifests are, byte for byte,
// what kubeadm writes for clusterConfig and the node's InitConfiguration.
func (cp *controlPlane) wantKubeadmManifests(t *testing.T, n *testNode, clusterConfig string) {
	t.Helper()
	if diff := cmpManifests(cp.kubeadmManifests(t, n, clusterConfig), readManifests(t, n)); diff != "" {
		t.Errorf("%s: the manifests are not what kubeadm writes: %s", n.Name, diff)
	}
}

// cmpManifests describes how two manifest directories differ ("" when
// they do not).
func cmpManifests(want, got map[string][]byte) string {
	var diffs []string
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			diffs = append(diffs, name+" is missing")
		case !bytes.Equal(w, g):
			diffs = append(diffs, fmt.Sprintf("%s differs:\n%s", name, textDiff(w, g)))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, name+" should not be there")
		}
	}
	return strings.Join(diffs, "\n")
}

// textDiff lists the lines only one side has.
func textDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	in := func(lines []string, l string) bool {
		for _, x := range lines {
			if x == l {
				return true
			}
		}
		return false
	}
	var out []string
	for _, l := range w {
		if !in(g, l) {
			out = append(out, "-"+l)
		}
	}
	for _, l := range g {
		if !in(w, l) {
			out = append(out, "+"+l)
		}
	}
	return strings.Join(out, "\n")
}
