package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What reconfigure leaves to others (review R1), through the built plugin
// and the real kubeadm on TestReconfigure's two nodes. None of it restarts
// a component: TestReconfigure counts the restarts.

// testVersionChangeRefused: a kubernetesVersion the node does not run, or
// one of another minor release than kubeadm, is refused with exit 4 before
// anything changes, naming each component with its tags; the flag shows it
// on a dry run.
func testVersionChangeRefused(t *testing.T, cp *controlPlane, n *testNode) {
	before := readManifests(t, n)
	cp.patch(t, n, "--set", "kubernetesVersion=v1.37.3")
	// restore refuses a backup of another kubernetesVersion: patch it back.
	t.Cleanup(func() { cp.patch(t, n, "--set", "kubernetesVersion=v1.37.2") })
	r := n.reconfigure(t)
	wantExit(t, r, 4)
	want := "error: the rendered manifests change versions (kube-apiserver: image tag v1.37.2 -> v1.37.3, " +
		"kube-controller-manager: image tag v1.37.2 -> v1.37.3, kube-scheduler: image tag v1.37.2 -> v1.37.3): " +
		"upgrade the node with kubeadm instead; pass --allow-version-change to apply it anyway\n"
	if !strings.HasSuffix(r.stderr, want) {
		t.Errorf("want the error\n%s%s", want, r)
	}
	wantExit(t, n.reconfigure(t, "--diff"), 4) // a dry run says what a run would do
	r = n.reconfigure(t, "--diff", "--allow-version-change")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "+    image: registry.k8s.io/kube-apiserver:v1.37.3\n") {
		t.Errorf("the diff does not show the new image: %s", r)
	}

	cp.patch(t, n, "--set", "kubernetesVersion=v1.36.5")
	r = n.reconfigure(t)
	wantExit(t, r, 4)
	if want := "error: kubeadm v1.37.2 is of another minor release than kubernetesVersion v1.36.5, and renders its own release's flags: " +
		"use the kubeadm of the cluster's release; pass --allow-version-change to apply it anyway\n"; !strings.HasSuffix(r.stderr, want) {
		t.Errorf("want the error\n%s%s", want, r)
	}
	if diff := cmpManifests(before, readManifests(t, n)); diff != "" {
		t.Errorf("a refused run changed the manifests: %s", diff)
	}
}

// testUpgradeInProgressRefused: while the upgrade record says an upgrade
// is in progress, reconfigure refuses (exit 4); its own flag lets it run;
// once the upgrade is aborted it runs again.
func testUpgradeInProgressRefused(t *testing.T, cp *controlPlane, n *testNode) {
	admin := func(args ...string) result {
		t.Helper()
		return runLong(t, time.Minute, "kubectl", append(append([]string{"kubeadmcfg"}, args...), "--kubeconfig", cp.Kubeconfig)...)
	}
	wantExit(t, admin("upgrade-start", "--to", "v1.37.3"), 0)
	t.Cleanup(func() {
		admin("upgrade-set", "upgrade-aborting")
		admin("upgrade-set", "upgrade-aborted")
		admin("upgrade-delete")
	})
	r := n.reconfigure(t)
	wantExit(t, r, 4)
	if want := "error: an upgrade from v1.37.2 to v1.37.3 is in progress (state upgrade-started in configmap kube-system/kubeadmcfg-upgrade): " +
		"reconfiguring a node now could undo its work or mix releases; finish or abort the upgrade first; pass --allow-during-upgrade to reconfigure anyway\n"; !strings.HasSuffix(r.stderr, want) {
		t.Errorf("want the error\n%s%s", want, r)
	}
	wantExit(t, n.reconfigure(t, "--allow-during-upgrade"), 0)
	wantExit(t, admin("upgrade-set", "upgrade-aborting"), 0)
	wantExit(t, n.reconfigure(t), 4)
	wantExit(t, admin("upgrade-set", "upgrade-aborted"), 0)
	wantExit(t, n.reconfigure(t), 0)
}

// testEtcdCompared: the nodes' etcd is external, so an etcd.yaml on a node
// is left alone, and the result says so. With etcd.local in the
// ClusterConfiguration, the real kubeadm renders the member's manifest and
// it is planned with the running member's initial cluster (dry runs: these
// nodes cannot run a local etcd member): a member that joined is
// unchanged, and an etcd.local setting it does not run yet changes it.
// Changing members for real is TestEtcdReconfigure's.
func testEtcdCompared(t *testing.T, cp *controlPlane, n *testNode) {
	etcdFile := filepath.Join(n.ManifestsDir, "etcd.yaml")
	t.Cleanup(func() { _ = os.Remove(etcdFile) })
	put := func(data string) {
		t.Helper()
		if err := os.WriteFile(etcdFile, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	type etcdResult struct {
		LastKnownGood string   `json:"lastKnownGood"`
		Warnings      []string `json:"warnings"`
		Diff          string   `json:"diff"`
		Etcd          struct {
			LeftAlone string `json:"leftAlone"`
		} `json:"etcd"`
		Components []struct {
			Name    string `json:"name"`
			Changed bool   `json:"changed"`
		} `json:"components"`
	}
	reconfigure := func(args ...string) (res etcdResult, planned, changed bool) {
		t.Helper()
		r := n.reconfigure(t, append([]string{"-o", "json"}, args...)...)
		wantExit(t, r, 0)
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("%v: %s", err, r)
		}
		if len(res.Warnings) != 0 {
			t.Errorf("warnings %q", res.Warnings)
		}
		for _, c := range res.Components {
			if c.Name == "etcd" {
				planned, changed = true, c.Changed
			}
		}
		return res, planned, changed
	}

	// External etcd: whatever etcd.yaml holds, it is left alone.
	other, err := os.ReadFile("../../pkg/controlplane/testdata/etcd/rendered-snapshot-count.yaml")
	if err != nil {
		t.Fatal(err)
	}
	put(string(other))
	res, planned, _ := reconfigure()
	if planned || res.LastKnownGood == "" || !strings.Contains(res.Etcd.LeftAlone, "etcd is external (etcd.external)") {
		t.Errorf("external etcd: planned %v, last known good %q, left alone %q", planned, res.LastKnownGood, res.Etcd.LeftAlone)
	}

	// Local etcd, on a member that joined: unchanged once the initial
	// cluster is the running one's.
	backup := cp.patch(t, n, "--unset", "etcd.external", "--set", "etcd.local.dataDir=/var/lib/etcd")
	t.Cleanup(func() { cp.restore(t, n, backup) })
	rendered := cp.renderEtcd(t, n, cp.liveDocument(t))
	alone := "    - --initial-cluster=" + n.Name + "=https://" + n.Address + ":2380\n"
	if !strings.Contains(rendered, alone) {
		t.Fatalf("kubeadm rendered no %q:\n%s", alone, rendered)
	}
	joined := "    - --initial-cluster=node-b=https://" + nodeBAddress + ":2380," + alone[len("    - --initial-cluster="):] +
		"    - --initial-cluster-state=existing\n"
	put(strings.Replace(rendered, alone, joined, 1))
	if res, planned, changed := reconfigure("--diff"); !planned || changed || strings.Contains(res.Diff, "etcd.yaml") {
		t.Errorf("etcd as rendered: planned %v, changed %v, diff:\n%s", planned, changed, res.Diff)
	}
	cp.patch(t, n, "--set", "etcd.local.extraArgs.snapshot-count=12345")
	res, planned, changed := reconfigure("--diff")
	if !planned || !changed || !strings.Contains(res.Diff, "+    - --snapshot-count=12345\n") || !strings.Contains(res.Diff, "-    - --snapshot-count=10000\n") {
		t.Errorf("a changed etcd setting: planned %v, changed %v, diff:\n%s", planned, changed, res.Diff)
	}
	if strings.Contains(res.Diff, "initial-cluster") {
		t.Errorf("the diff touches the member's initial cluster:\n%s", res.Diff)
	}
}

// renderEtcd is what `kubeadm init phase etcd local` writes for
// clusterConfig on node n.
func (cp *controlPlane) renderEtcd(t *testing.T, n *testNode, clusterConfig string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "kubeadm.yaml")
	if err := os.WriteFile(file, []byte(n.ConfigFile(clusterConfig)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cp.Bins.Kubeadm, "init", "phase", "etcd", "local", "--config", file, "--dry-run")
	cmd.Env = append(os.Environ(), "KUBEADM_INIT_DRYRUN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubeadm init phase etcd local: %v: %s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "etcd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
