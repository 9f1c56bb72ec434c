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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
)

// TestLeastPrivilege applies deploy/rbac.yaml exactly as the README says
// (`kubectl apply -f deploy/rbac.yaml`, from a kubeconfig whose namespace is
// not kube-system) and shows that it lands in kube-system and is enough
// there: a member of the group it binds runs every verb, with the plugin's
// default namespace, and nothing more. Without it the refusal names the
// missing permission (exit 6).
func TestLeastPrivilege(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const ns = "kube-system"
	kubeconfig := kubeconfigInNamespace(t, e.ns)
	// A member of kubeadmcfg:operators, by impersonation from the admin,
	// on the kubeconfig whose current namespace is the test's.
	member := func(args ...string) result {
		t.Helper()
		return run(t, "kubectl", beforeDash(append([]string{"kubeadmcfg"}, args...), "--kubeconfig", kubeconfig,
			"--as", "operator-1", "--as-group", "kubeadmcfg:operators")...)
	}
	r := member("get")
	wantExit(t, r, 6)
	if !strings.Contains(r.stderr, `cannot get resource "configmaps"`) {
		t.Fatalf("the refusal does not name the missing permission: %s", r)
	}
	wantExit(t, member("patch", "--set", "clusterName=x"), 6)
	wantExit(t, member("edit"), 6)
	wantExit(t, member("upgrade-start", "--to", "v1.37.3"), 6)
	wantExit(t, member("upgrade-apply", "v1.37.3"), 6)

	// Apply the manifest as the README says, and check where it went.
	t.Cleanup(func() { restoreKubeSystem(t) })
	r = run(t, "kubectl", "apply", "-f", "../../deploy/rbac.yaml", "--kubeconfig", kubeconfig)
	wantExit(t, r, 0)
	for _, name := range []string{"role.rbac.authorization.k8s.io/kubeadmcfg", "rolebinding.rbac.authorization.k8s.io/kubeadmcfg"} {
		if !strings.Contains(r.stdout, name+" created") {
			t.Errorf("kubectl apply did not create %s: %s", name, r)
		}
	}
	if _, err := s.admin.RbacV1().Roles(ns).Get(ctx, "kubeadmcfg", metav1.GetOptions{}); err != nil {
		t.Fatalf("the Role is not in %s: %v", ns, err)
	}
	if _, err := s.admin.RbacV1().RoleBindings(ns).Get(ctx, "kubeadmcfg", metav1.GetOptions{}); err != nil {
		t.Fatalf("the RoleBinding is not in %s: %v", ns, err)
	}
	if roles, err := s.admin.RbacV1().Roles(e.ns).List(ctx, metav1.ListOptions{}); err != nil || len(roles.Items) != 0 {
		t.Fatalf("the manifest created Roles in the current namespace %s: %v %v", e.ns, roles, err)
	}

	holder := "controller-0"
	if _, err := s.admin.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.scriptedEditor(`sed -i 's|^clusterName: .*|clusterName: edited-by-operator|' "$f"`)
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
		{"patch", "--backup-dir", dir, "--if-leader", ns + "/kube-controller-manager", "--identity", "controller-0", "--set", "clusterName=rbac"},
		{"patch", "--backup-dir", dir, "--dry-run=server", "--set", "clusterName=dry"},
		{"edit", "--backup-dir", dir},
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
		r := member(args...)
		wantExit(t, r, 0)
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("%v warned: %s", args, r.stderr)
		}
		if args[0] == "edit" && !strings.Contains(r.stdout, "kubeadm-config edited") {
			t.Errorf("edit wrote nothing: %s", r)
		}
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	// A leader Lease that looks expired is watched for one lease duration
	// before --if-leader trusts or drops it: the Role's watch on it makes
	// that a skip (exit 0), not a refusal (exit 6).
	expiredLooking(t, ns, "kube-controller-manager")
	r = member("patch", "--if-leader", ns+"/kube-controller-manager", "--identity", "controller-0", "--set", "clusterName=expired")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "skipped: lease "+ns+"/kube-controller-manager has expired") {
		t.Fatalf("an expired leader Lease was not reported as such: %s", r)
	}
	// The control-plane nodes of a plan like kubeadm's come from a
	// cluster-wide list, which the manifest's ClusterRole kubeadmcfg-nodes
	// grants to the same group.
	node := "least-privilege-cp-0"
	if _, err := s.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	r = member("upgrade-start", "--to", "v1.37.3", "--plan", "kubeadm")
	wantExit(t, r, 0)
	if r = member("upgrade-plan", "show", "--current"); !strings.Contains(r.stdout, "control-plane nodes: "+node+"\n") {
		t.Fatalf("the kubeadm plan was not expanded for the cluster's nodes: %s", r)
	}
	for _, args := range [][]string{{"upgrade-set", "upgrade-aborting"}, {"upgrade-set", "upgrade-aborted"}, {"upgrade-delete"}} {
		wantExit(t, member(args...), 0)
	}
	// The rollout's verbs: the node's components and its agent as the
	// preflight needs them, then a write with its rollout, the record's
	// transitions with their Events, a watch, and an undo that writes
	// kubeadm-config back.
	cp := &fakeNodes{e: e, leases: ns}
	cp.adopt(node)
	cp.setPodsReady(node, true)
	cp.renew(node, time.Now())
	// upgrade-apply and -resume: the preflight's reads (the rollout record,
	// kubeadm-config, every Node's kubelet, the agents' Leases), the
	// record's writes and their Events, and upgrade-status's agents.
	cp.publish(node, nodestate.State{KubeadmVersions: []string{"v1.37.3"}, Etcd: &nodestate.EtcdHealth{Healthy: true}})
	cp.setKubelet(node, "v1.37.2")
	for _, args := range [][]string{
		{"upgrade-apply", "v1.37.3"},
		{"upgrade-status"},
		{"upgrade-status", "-o", "json"},
		{"upgrade-set", "upgrading-control-plane-" + node}, // as its agent would
		{"upgrade-fail"},
		{"upgrade-resume"},
		{"upgrade-set", "upgrade-aborting"},
		{"upgrade-set", "upgrade-aborted"},
		{"upgrade-delete"},
	} {
		r := member(args...)
		wantExit(t, r, 0)
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("%v warned: %s", args, r.stderr)
		}
	}
	// The node's agent renews its Lease every few seconds: the upgrade
	// commands above may take longer than its duration on a loaded
	// machine, and the rollout's preflight must find the agent alive.
	cp.renew(node, time.Now())
	for _, args := range [][]string{
		{"nodes"},
		{"patch", "--backup-dir", dir, "--set", "apiServer.extraArgs.audit-log-maxage=8", "--rollout"},
		{"rollout", "status"},
		{"rollout", "status", "-o", "json"},
		{"rollout", "pause"},
		{"rollout", "resume"},
		{"rollout", "history"},
		{"rollout", "pause"},
		{"rollout", "undo", "--backup-dir", dir},
		{"rollout", "start", "--nodes", node},
	} {
		r := member(args...)
		wantExit(t, r, 0)
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("%v warned: %s", args, r.stderr)
		}
	}
	r = member("rollout", "status", "-w", "--timeout", "3s")
	wantEnded(t, r, 7)
	if strings.Contains(r.stderr, "forbidden") || !strings.Contains(r.stderr, "context deadline exceeded") {
		t.Errorf("status -w did not watch until its timeout: %s", r)
	}
	// The Role grants nothing beyond its ConfigMaps and the queue's Leases:
	// a controller's leader-election Lease stays out of reach.
	r = member("get", "--configmap", "some-other-configmap")
	wantExit(t, r, 6)
	r = run(t, "kubectl", "delete", "lease", "kube-controller-manager", "-n", ns, "--kubeconfig", kubeconfig,
		"--as", "operator-1", "--as-group", "kubeadmcfg:operators")
	if r.code == 0 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("the Role lets its holder delete a leader-election Lease: %s", r)
	}
	// A user outside the group is still refused, until bound to the Role
	// as the manifest says (with its own token, no impersonation).
	user := func(args ...string) result {
		t.Helper()
		return run(t, "kubectl", append(append([]string{"kubeadmcfg"}, args...), "--kubeconfig", s.cluster.Kubeconfig,
			"--context", testcluster.UnprivilegedContext)...)
	}
	wantExit(t, user("get"), 6)
	wantExit(t, run(t, "kubectl", "create", "rolebinding", "kubeadmcfg-unprivileged", "-n", ns, "--role", "kubeadmcfg",
		"--user", testcluster.UnprivilegedUser, "--kubeconfig", kubeconfig), 0)
	wantExit(t, user("get"), 0)
}

// kubeconfigInNamespace writes a copy of the cluster's kubeconfig whose
// current context (the admin) has ns as its namespace.
func kubeconfigInNamespace(t *testing.T, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(s.cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.CurrentContext = testcluster.AdminContext
	cfg.Contexts[testcluster.AdminContext].Namespace = ns
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// restoreKubeSystem undoes what TestLeastPrivilege did in kube-system: the
// manifest's objects, the test's Lease and binding, and the document.
func restoreKubeSystem(t *testing.T) {
	ctx := context.Background()
	const ns = "kube-system"
	rbac := s.admin.RbacV1()
	for _, err := range []error{
		rbac.RoleBindings(ns).Delete(ctx, "kubeadmcfg", metav1.DeleteOptions{}),
		rbac.RoleBindings(ns).Delete(ctx, "kubeadmcfg-unprivileged", metav1.DeleteOptions{}),
		rbac.Roles(ns).Delete(ctx, "kubeadmcfg", metav1.DeleteOptions{}),
		rbac.ClusterRoleBindings().Delete(ctx, "kubeadmcfg-nodes", metav1.DeleteOptions{}),
		rbac.ClusterRoles().Delete(ctx, "kubeadmcfg-nodes", metav1.DeleteOptions{}),
		s.admin.CoordinationV1().Leases(ns).Delete(ctx, "kube-controller-manager", metav1.DeleteOptions{}),
		s.admin.CoreV1().ConfigMaps(ns).Delete(ctx, "kubeadmcfg-upgrade", metav1.DeleteOptions{}),
		s.admin.CoreV1().ConfigMaps(ns).Delete(ctx, "kubeadmcfg-rollout", metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	cm, err := s.admin.CoreV1().ConfigMaps(ns).Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	cm.Data["ClusterConfiguration"] = s.seedDoc
	if _, err := s.admin.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
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

// expiredLooking makes the Lease ns/name look expired: renewed an hour ago,
// for one second.
func expiredLooking(t *testing.T, ns, name string) {
	t.Helper()
	leases := s.admin.CoordinationV1().Leases(ns)
	l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hourAgo, second := metav1.NewMicroTime(time.Now().Add(-time.Hour)), int32(1)
	l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &hourAgo, &second
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
