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

// TestAgentManifests: the agent's DaemonSet and hack/rbac.yaml, as an
// operator applies them, pass the API server's own checks (schema,
// admission: the PriorityClass, the ServiceAccount's namespace) with
// --dry-run=server; nothing is created.
func TestAgentManifests(t *testing.T) {
	apply := func(files ...string) result {
		t.Helper()
		args := []string{"apply", "--dry-run=server", "--kubeconfig", s.cluster.Kubeconfig, "--context", testcluster.AdminContext}
		for _, f := range files {
			args = append(args, "-f", f)
		}
		return run(t, "kubectl", args...)
	}
	r := apply("../../hack/rbac.yaml", "../../hack/agent-daemonset.yaml")
	wantExit(t, r, 0)
	for _, want := range []string{
		"serviceaccount/kubeadmcfg-agent created (server dry run)",
		"daemonset.apps/kubeadmcfg-agent created (server dry run)",
		"role.rbac.authorization.k8s.io/kubeadmcfg-agent created (server dry run)",
		"rolebinding.rbac.authorization.k8s.io/kubeadmcfg-agent created (server dry run)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kubectl apply did not say %q:\n%s", want, r)
		}
	}
	// A manifest the server refuses fails the check: an unknown field.
	bad := strings.Replace(readString(t, "../../hack/agent-daemonset.yaml"), "hostNetwork: true", "hostNetwork: true\n      hostNetwrok: true", 1)
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
