package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
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
			"--set", appendSAN(arg))
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
