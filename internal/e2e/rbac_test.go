package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// TestLeastPrivilege: without a role the unprivileged user is refused with
// exit 6 naming what is missing; bound to hack/rbac.yaml's Role and nothing
// else, it runs every verb.
func TestLeastPrivilege(t *testing.T) {
	e := newEnv(t)
	as := func(args ...string) result {
		t.Helper()
		return e.kubectlAs(testcluster.UnprivilegedContext, append([]string{"kubeadmcfg"}, args...)...)
	}
	r := as("get")
	wantExit(t, r, 6)
	if !strings.Contains(r.stderr, `cannot get resource "configmaps"`) {
		t.Fatalf("the refusal does not name the missing permission: %s", r)
	}
	wantExit(t, as("patch", "--set", "clusterName=x"), 6)
	wantExit(t, as("upgrade-start", "--to", "v1.37.3"), 6)

	// Apply the Role from hack/rbac.yaml and bind the user to it alone.
	wantExit(t, e.kubectl("apply", "-f", "../../hack/rbac.yaml"), 0)
	_, err := s.admin.RbacV1().RoleBindings(e.ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "unprivileged-kubeadmcfg"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kubeadmcfg"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: testcluster.UnprivilegedUser}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := "controller-0"
	if _, err := s.admin.CoordinationV1().Leases(e.ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "kubeadm.yaml")
	for _, args := range [][]string{
		{"get"},
		{"get", "-o", "json"},
		{"validate"},
		{"backup", "--backup-dir", dir},
		{"backup", "list", "--backup-dir", dir},
		{"backup", "verify", "--all", "--backup-dir", dir},
		{"patch", "--backup-dir", dir, "--set", "apiServer.extraArgs.v=2"},
		{"patch", "--backup-dir", dir, "--if-leader", e.ns + "/kube-controller-manager", "--identity", "controller-0", "--set", "clusterName=rbac"},
		{"patch", "--backup-dir", dir, "--dry-run=server", "--set", "clusterName=dry"},
		{"restore", "--latest", "--backup-dir", dir, "--force"},
		{"restore", "--latest", "--backup-dir", dir, "--to-file", file},
		{"backup", "prune", "--keep", "1", "--backup-dir", dir},
		{"upgrade-start", "--to", "v1.37.3"},
		{"upgrade-set", "downloading-images"},
		{"upgrade-host", "controller-1", "upgrading-control-plane"},
		{"upgrade-status"},
		{"upgrade-fail"},
		{"upgrade-audit"},
		{"upgrade-set", "upgrade-aborting"},
		{"upgrade-set", "upgrade-aborted"},
		{"upgrade-delete"},
		{"upgrade-start", "--to", "v1.37.3", "--plan", "kubeadm", "--control-plane-nodes", "cp-0"},
		{"upgrade-run", "upgrading-control-plane-cp-0", "--", "true"},
		{"upgrade-run", "upgrading-kubelet", "--host", "worker-1", "--", "true"},
		{"upgrade-plan", "show", "--current"},
		{"upgrade-audit", "--stale-after", "1s"},
		{"upgrade-set", "upgrade-aborting"},
		{"upgrade-set", "upgrade-aborted"},
		{"upgrade-delete"},
	} {
		r := as(args...)
		wantExit(t, r, 0)
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("%v warned: %s", args, r.stderr)
		}
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	// The control-plane nodes of a plan like kubeadm's come from a
	// cluster-wide list: the ClusterRole kubeadmcfg-nodes grants it.
	ctx := context.Background()
	node := "least-privilege-cp-0"
	if _, err := s.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	wantExit(t, as("upgrade-start", "--to", "v1.37.3", "--plan", "kubeadm"), 6)
	binding := "kubeadmcfg-nodes-" + e.ns
	if _, err := s.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubeadmcfg-nodes"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: testcluster.UnprivilegedUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding, metav1.DeleteOptions{})
	})
	// RBAC caches take a moment to see a new binding.
	for range 50 {
		if r = as("upgrade-start", "--to", "v1.37.3", "--plan", "kubeadm"); r.code != 6 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "plan kubeadm") {
		t.Fatalf("%s", r)
	}
	// The Role grants nothing beyond its ConfigMaps and the queue's Leases:
	// a controller's leader-election Lease stays out of reach.
	r = as("get", "--configmap", "some-other-configmap")
	wantExit(t, r, 6)
	r = e.kubectlAs(testcluster.UnprivilegedContext, "delete", "lease", "kube-controller-manager")
	if r.code == 0 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("the Role lets its holder delete a leader-election Lease: %s", r)
	}
}

// TestWithoutLeaseRightsWritersFallBack: a user who may write kubeadm-config
// but not Leases still loses nothing under contention; the queue is skipped
// with a warning and retries back off instead.
func TestWithoutLeaseRightsWritersFallBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := s.admin.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-only"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{"kubeadm-config"}, Verbs: []string{"get", "update"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.admin.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "configmaps-only"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: testcluster.UnprivilegedUser}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const writers, patches = 6, 4
	warned := 0
	for _, r := range e.storm("nl", writers, patches, func(arg string) result {
		return e.kubectlAs(testcluster.UnprivilegedContext, "kubeadmcfg", "patch", "--no-backup",
			"--set", "apiServer.extraArgs."+arg+"=1")
	}) {
		if strings.Contains(r.stderr, "write queue could not be used") {
			warned++
		}
	}
	if warned == 0 {
		t.Fatal("no writer ever needed the queue: the fallback was not exercised")
	}
	t.Logf("%d of %d patches fell back from the queue with a warning", warned, writers*patches)
}
