package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// testNodes are two nodes of a stacked etcd, each with values of its own,
// node 0 without patches.
func testNodes() *testcluster.Nodes {
	nodes := &testcluster.Nodes{Kubeconfig: "/run/admin.conf", Etcd: testcluster.EtcdStacked,
		Release: testcluster.Release{Version: "v1.36.3", Kubeadm: "/bin/v1.36.3/kubeadm"}}
	for i := range 2 {
		root := fmt.Sprintf("/run/cp-%d", i)
		n := &testcluster.Node{
			NodeSpec: testcluster.NodeSpec{Name: fmt.Sprintf("cp-%d", i), Address: fmt.Sprintf("192.0.2.%d", 11+i),
				BindPort: int32(6443 + i), AgentMetricsAddress: testcluster.LocalAgentMetricsAddress(i)},
			Root: root, ManifestsDir: root + "/etc/kubernetes/manifests",
			Etcd:            &testcluster.EtcdMember{ClientURL: fmt.Sprintf("https://192.0.2.%d:2379", 11+i)},
			KubeadmTemplate: root + "/usr/local/kubernetes/{version}/bin/kubeadm", KubeletRestart: root + "/harness/kubelet-restart",
			FaultsDir: root + "/harness/faults", KubeletHealthz: fmt.Sprintf("http://127.0.0.1:%d/healthz", 10248+10*i),
			TmpDir: root + "/tmp", KubeletConfig: root + "/var/lib/kubelet/config.yaml",
		}
		if i > 0 {
			n.PatchesDir = root + "/etc/kubernetes/patches"
		}
		nodes.Nodes = append(nodes.Nodes, n)
	}
	return nodes
}

// CMD gets each node's own values, the agent's node flags among them
// (docs/development.md, "Running an agent on it"), each once: those of an
// enclosing run are not passed on beside them, and the rest of run's
// environment is.
func TestCommandEnv(t *testing.T) {
	environ := []string{"HOME=/home/op", "TMPDIR=/var/tmp", "KUBECONFIG=/other.conf",
		"LOCALCLUSTER_0_METRICS_ADDRESS=127.0.0.1:10268", "LOCALCLUSTER_IGNORE_PREFLIGHT_ERRORS=all"}
	env := commandEnv(environ, testNodes())
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := got[k]; ok {
			t.Errorf("%s given twice", k)
		}
		got[k] = v
	}
	want := map[string]string{
		"HOME": "/home/op", "TMPDIR": "/var/tmp",
		"KUBECONFIG": "/run/admin.conf", "KUBEADM": "/bin/v1.36.3/kubeadm",
		"LOCALCLUSTER_NODES": "cp-0 cp-1", "LOCALCLUSTER_ETCD": "stacked", "LOCALCLUSTER_KUBERNETES_VERSION": "v1.36.3",
		"LOCALCLUSTER_IGNORE_PREFLIGHT_ERRORS": "SystemVerification",

		"LOCALCLUSTER_0_DIR": "/run/cp-0", "LOCALCLUSTER_0_MANIFESTS": "/run/cp-0/etc/kubernetes/manifests",
		"LOCALCLUSTER_0_ADDRESS": "192.0.2.11", "LOCALCLUSTER_0_BIND_PORT": "6443",
		"LOCALCLUSTER_0_ETCD_ENDPOINT":    "https://192.0.2.11:2379",
		"LOCALCLUSTER_0_KUBEADM_TEMPLATE": "/run/cp-0/usr/local/kubernetes/{version}/bin/kubeadm",
		"LOCALCLUSTER_0_KUBELET_RESTART":  "/run/cp-0/harness/kubelet-restart",
		"LOCALCLUSTER_0_KUBELET_HEALTHZ":  "http://127.0.0.1:10248/healthz",
		"LOCALCLUSTER_0_FAULTS":           "/run/cp-0/harness/faults",
		"LOCALCLUSTER_0_METRICS_ADDRESS":  "127.0.0.1:10300",
		"LOCALCLUSTER_0_TMPDIR":           "/run/cp-0/tmp",
		"LOCALCLUSTER_0_KUBELET_CONFIG":   "/run/cp-0/var/lib/kubelet/config.yaml",

		"LOCALCLUSTER_1_DIR": "/run/cp-1", "LOCALCLUSTER_1_MANIFESTS": "/run/cp-1/etc/kubernetes/manifests",
		"LOCALCLUSTER_1_PATCHES": "/run/cp-1/etc/kubernetes/patches",
		"LOCALCLUSTER_1_ADDRESS": "192.0.2.12", "LOCALCLUSTER_1_BIND_PORT": "6444",
		"LOCALCLUSTER_1_ETCD_ENDPOINT":    "https://192.0.2.12:2379",
		"LOCALCLUSTER_1_KUBEADM_TEMPLATE": "/run/cp-1/usr/local/kubernetes/{version}/bin/kubeadm",
		"LOCALCLUSTER_1_KUBELET_RESTART":  "/run/cp-1/harness/kubelet-restart",
		"LOCALCLUSTER_1_KUBELET_HEALTHZ":  "http://127.0.0.1:10258/healthz",
		"LOCALCLUSTER_1_FAULTS":           "/run/cp-1/harness/faults",
		"LOCALCLUSTER_1_METRICS_ADDRESS":  "127.0.0.1:10310",
		"LOCALCLUSTER_1_TMPDIR":           "/run/cp-1/tmp",
		"LOCALCLUSTER_1_KUBELET_CONFIG":   "/run/cp-1/var/lib/kubelet/config.yaml",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CMD's environment (-want +got):\n%s", diff)
	}
}

// Every variable CMD gets is described where an operator reads: run
// --help, and the package comment.
func TestHelpNamesEveryVariable(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, ok := strings.Cut(string(src), "\npackage main")
	if !ok {
		t.Fatal("main.go has no package clause")
	}
	index := regexp.MustCompile(`_[0-9]+_`)
	seen := map[string]bool{}
	for _, kv := range commandEnv(nil, testNodes()) {
		k, _, _ := strings.Cut(kv, "=")
		name := index.ReplaceAllString(k, "_<I>_")
		if seen[name] {
			continue
		}
		seen[name] = true
		named := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
		if !named.MatchString(runHelp) {
			t.Errorf("run --help does not describe %s", name)
		}
		if !named.MatchString(doc) {
			t.Errorf("the package comment does not describe %s", name)
		}
	}
}

// TestDemosRunTheDocumentedAgent: each demo starts node I's agent with
// the line docs/development.md gives ("Running an agent on it"): the
// upgrade demo the first, the rollout demo the second.
func TestDemosRunTheDocumentedAgent(t *testing.T) {
	guide, err := os.ReadFile("../../docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(guide), "\n### Running an agent on it\n")
	if !ok {
		t.Fatal(`docs/development.md has no "Running an agent on it"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?s)\n```sh\n(.*?)```\n").FindAllStringSubmatch(section, -1)
	if len(blocks) != 2 {
		t.Fatalf(`"Running an agent on it" has %d sh blocks, want 2`, len(blocks))
	}
	// The agent's step of a demo: a bash string in double quotes.
	stepRE := regexp.MustCompile(`(?s)\n\tstep "((?:TMPDIR=|kubectl kubeadmcfg agent ).*? &)"\n`)
	for i, demo := range []string{"../demo-upgrade.sh", "../demo-rollout.sh"} {
		script, err := os.ReadFile(demo)
		if err != nil {
			t.Fatal(err)
		}
		m := stepRE.FindSubmatch(script)
		if m == nil {
			t.Errorf("%s starts no agent with a step", demo)
			continue
		}
		printed := strings.NewReplacer(`${i}`, "1", `${nodes[i]}`, "cp-1", `\"`, `"`, `\$`, `$`, `\\`, `\`).Replace(string(m[1])) + "\n"
		if printed != blocks[i][1] {
			t.Errorf("%s runs node 1's agent as\n%s\nnot as docs/development.md says:\n%s", demo, printed, blocks[i][1])
		}
	}
}
