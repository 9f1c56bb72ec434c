package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// TestAgentManifests: the agent's DaemonSet, deploy/rbac.yaml,
// deploy/agent-policy.yaml (its CEL compiled by the API server) and a node's
// deploy/agent-node-rbac.yaml, as an operator applies them, pass the API
// server's own checks (schema, admission: the PriorityClass, the
// ServiceAccount's namespace) with --dry-run=server, and so does the
// DaemonSet patched for an external etcd, for agents that run upgrades, and
// for both; nothing is created.
func TestAgentManifests(t *testing.T) {
	apply := func(files ...string) result {
		t.Helper()
		args := []string{"apply", "--dry-run=server", "--kubeconfig", s.cluster.Kubeconfig, "--context", testcluster.AdminContext}
		for _, f := range files {
			args = append(args, "-f", f)
		}
		return run(t, "kubectl", args...)
	}
	nodeRBAC := filepath.Join(t.TempDir(), "agent-node-rbac.yaml")
	if err := os.WriteFile(nodeRBAC, []byte(strings.ReplaceAll(readString(t, "../../deploy/agent-node-rbac.yaml"), "@NODE@", "cp-0")), 0o600); err != nil {
		t.Fatal(err)
	}
	r := apply("../../deploy/rbac.yaml", "../../deploy/agent-policy.yaml", nodeRBAC, "../../deploy/agent-daemonset.yaml")
	wantExit(t, r, 0)
	for _, want := range []string{
		"serviceaccount/kubeadmcfg-agent created (server dry run)",
		"daemonset.apps/kubeadmcfg-agent created (server dry run)",
		"role.rbac.authorization.k8s.io/kubeadmcfg-agent created (server dry run)",
		"rolebinding.rbac.authorization.k8s.io/kubeadmcfg-agent created (server dry run)",
		"role.rbac.authorization.k8s.io/kubeadmcfg-agent-leases created (server dry run)",
		"role.rbac.authorization.k8s.io/kubeadmcfg-agent-cp-0 created (server dry run)",
		"rolebinding.rbac.authorization.k8s.io/kubeadmcfg-agent-cp-0 created (server dry run)",
		"validatingadmissionpolicy.admissionregistration.k8s.io/kubeadmcfg-agent-own-lease created (server dry run)",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/kubeadmcfg-agent-own-lease created (server dry run)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kubectl apply did not say %q:\n%s", want, r)
		}
	}
	// With an external etcd, as docs/agent.md says to apply it: without
	// the stacked etcd's files.
	patched := run(t, "kubectl", "patch", "--local", "-f", "../../deploy/agent-daemonset.yaml",
		"--patch-file", "../../deploy/agent-daemonset-external-etcd.yaml", "-o", "yaml")
	wantExit(t, patched, 0)
	if strings.Contains(patched.stdout, "pki/etcd") || !strings.Contains(patched.stdout, "/etc/kubernetes/manifests") {
		t.Errorf("the external etcd patch leaves the etcd files, or more goes:\n%s", patched.stdout)
	}
	external := filepath.Join(t.TempDir(), "external.yaml")
	if err := os.WriteFile(external, []byte(patched.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := apply(external); r.code != 0 || !strings.Contains(r.stdout, "daemonset.apps/kubeadmcfg-agent created (server dry run)") {
		t.Errorf("the DaemonSet for an external etcd: %s", r)
	}
	// For agents that run upgrades, and for those with an external etcd
	// (the patch of upgrades first, then the external etcd's on its
	// output, as docs/agent.md pipes them).
	upgrades := run(t, "kubectl", "patch", "--local", "-f", "../../deploy/agent-daemonset.yaml",
		"--patch-file", "../../deploy/agent-daemonset-upgrades.yaml", "-o", "yaml")
	wantExit(t, upgrades, 0)
	upgradesFile := filepath.Join(t.TempDir(), "upgrades.yaml")
	if err := os.WriteFile(upgradesFile, []byte(upgrades.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	both := run(t, "kubectl", "patch", "--local", "-f", upgradesFile, "--patch-file", "../../deploy/agent-daemonset-external-etcd.yaml", "-o", "yaml")
	wantExit(t, both, 0)
	if strings.Contains(both.stdout, "/var/lib/etcd") || !strings.Contains(both.stdout, "path: /etc/kubernetes\n") ||
		!strings.Contains(upgrades.stdout, "path: /var/lib/etcd\n") {
		t.Errorf("the patches for upgrades and an external etcd:\n%s\nthen:\n%s", upgrades.stdout, both.stdout)
	}
	bothFile := filepath.Join(t.TempDir(), "upgrades-external.yaml")
	if err := os.WriteFile(bothFile, []byte(both.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{upgradesFile, bothFile} {
		if r := apply(f); r.code != 0 || !strings.Contains(r.stdout, "daemonset.apps/kubeadmcfg-agent created (server dry run)") {
			t.Errorf("the DaemonSet for upgrades (%s): %s", filepath.Base(f), r)
		}
	}
	// A manifest the server refuses fails the check: an unknown field.
	bad := strings.Replace(readString(t, "../../deploy/agent-daemonset.yaml"), "hostNetwork: true", "hostNetwork: true\n      hostNetwrok: true", 1)
	file := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	r = apply(file)
	if r.code == 0 || !strings.Contains(r.stderr, "hostNetwrok") {
		t.Errorf("a DaemonSet with an unknown field passed: %s", r)
	}
	if _, err := s.admin.AppsV1().DaemonSets("kube-system").Get(context.Background(), "kubeadmcfg-agent", metav1.GetOptions{}); err == nil {
		t.Error("the dry run created the DaemonSet")
	}
}
