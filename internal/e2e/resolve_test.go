package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
)

// The tests in this file make the plugin find out, against the real API
// server, whether a write whose answer it did not get landed: the proxy
// lets one write commit, lets another writer in, and then loses or replaces
// the answer, so that the live copy no longer says whose write came first
// and only the history from the write's precondition does. Every edit is an
// append, ours and the other writer's, so a second application, or a lost
// one, shows.

// otherWriter is a Meanwhile hook: another plugin process appends san,
// straight to the API server, and its own write id replaces ours. The hook
// runs inside the proxy; check the returned error once the test's command
// is done.
func (e *env) otherWriter(san string) (func(), func() error) {
	var mu sync.Mutex
	var err error
	return func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := e.withConnection(testcluster.AdminContext, []string{"kubeadmcfg", "patch", "--no-backup", "--set", appendSAN(san)})
			out, runErr := exec.CommandContext(ctx, "kubectl", args...).CombinedOutput()
			mu.Lock()
			defer mu.Unlock()
			if runErr != nil {
				err = fmt.Errorf("the other writer: %w: %s", runErr, out)
			}
		}, func() error {
			mu.Lock()
			defer mu.Unlock()
			return err
		}
}

// wantAppliedOnce fails unless r exited 0 and the document holds ours and
// the other writer's append exactly once each.
func (e *env) wantAppliedOnce(r result, ours, other string, otherErr func() error) {
	e.t.Helper()
	if err := otherErr(); err != nil {
		e.t.Fatal(err)
	}
	wantExit(e.t, r, 0)
	doc := e.document()
	if n, m := countSAN(doc, ours), countSAN(doc, other); n != 1 || m != 1 {
		e.t.Fatalf("our append is present %d times and the other writer's %d times, want once each:\n%s", n, m, doc)
	}
}

// TestLostAnswerUnderLeastPrivilege (E1): the plugin runs with exactly the
// Role of deploy/rbac.yaml. Its write commits, another writer gets in, the
// answer is lost: finding out whether the write landed needs a watch on
// kubeadm-config from the write's precondition, by name (a field selector
// on metadata.name, which the Role's resourceNames admit). The write is
// recognised as landed: exit 0, applied once. Without watch in the Role the
// plugin exited 6, which says nothing was written.
func TestLostAnswerUnderLeastPrivilege(t *testing.T) {
	e := newEnv(t)
	applyLeastPrivilegeRole(t, e.ns)
	p := startProxy(t)
	write, otherErr := e.otherWriter("other-writer")
	p.SetFaults(testcluster.Faults{LoseAnswer: 1, MaxWrites: 1, Meanwhile: write})
	r := e.pluginVia(p.Kubeconfig, "patch", "--no-backup", "--timeout", "20s", "--set", appendSAN("ours"),
		"--as", "operator-1", "--as-group", "kubeadmcfg:operators")
	if lost := p.Lost(); len(lost) != 1 || !lost[0].Landed {
		t.Fatalf("the proxy lost %v, want the answer to one committed write", lost)
	}
	e.wantAppliedOnce(r, "ours", "other-writer", otherErr)
}

// applyLeastPrivilegeRole applies the Role kubeadmcfg of deploy/rbac.yaml and
// its RoleBinding (the group kubeadmcfg:operators) to ns, as they are but
// for the namespace.
func applyLeastPrivilegeRole(t *testing.T, ns string) {
	t.Helper()
	data, err := os.ReadFile("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var picked []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "\n  name: kubeadmcfg\n") &&
			(strings.Contains(doc, "\nkind: Role\n") || strings.Contains(doc, "\nkind: RoleBinding\n")) {
			picked = append(picked, strings.ReplaceAll(doc, "namespace: kube-system", "namespace: "+ns))
		}
	}
	if len(picked) != 2 {
		t.Fatalf("deploy/rbac.yaml: found %d of the Role kubeadmcfg and its RoleBinding", len(picked))
	}
	file := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(picked, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	wantExit(t, run(t, "kubectl", "apply", "-f", file, "--kubeconfig", s.cluster.Kubeconfig, "--context", testcluster.AdminContext), 0)
}

// TestLostAnswerWatchClosed (E1): as above, and the proxy closes the
// watches that would tell, right after the server accepted them and before
// their first event, as an API server restart or a proxy's idle timeout
// does. A closed watch is a broken connection: the plugin watches again and
// exits 0 with the append applied once. It used to exit 1.
func TestLostAnswerWatchClosed(t *testing.T) {
	e := newEnv(t)
	p := startProxy(t)
	write, otherErr := e.otherWriter("other-writer")
	p.SetFaults(testcluster.Faults{LoseAnswer: 1, MaxWrites: 1, Meanwhile: write, CloseWatches: 2})
	r := e.pluginVia(p.Kubeconfig, "patch", "--no-backup", "--timeout", "20s", "--set", appendSAN("ours"))
	if n := p.ClosedWatches(); n != 2 {
		t.Fatalf("the proxy closed %d watches, want 2: %s", n, r)
	}
	e.wantAppliedOnce(r, "ours", "other-writer", otherErr)
}

// TestLostAnswerAs503 (E2): the proxy forwards a write, lets it commit, and
// answers 503 with Retry-After, as a load balancer that gave up waiting
// does. client-go used to send the write again by itself; the copy met our
// own write and got a 409, and the plugin applied the edit again. Alone,
// the token on the copy read next tells it landed; with another writer in
// between, only the history does, which the plugin reads only because it
// knows the 503 may hide a landed write.
func TestLostAnswerAs503(t *testing.T) {
	for _, other := range []bool{false, true} {
		t.Run(fmt.Sprintf("another writer in between %v", other), func(t *testing.T) {
			e := newEnv(t)
			p := startProxy(t)
			f := testcluster.Faults{Unavailable: 1, MaxWrites: 1}
			otherErr := func() error { return nil }
			if other {
				f.Meanwhile, otherErr = e.otherWriter("other-writer")
			}
			p.SetFaults(f)
			r := e.pluginVia(p.Kubeconfig, "patch", "--no-backup", "--timeout", "20s", "--set", appendSAN("ours"))
			if lost := p.Lost(); len(lost) != 1 || !lost[0].Landed || lost[0].Status != 503 {
				t.Fatalf("the proxy replaced %v, want the answer to one committed write", lost)
			}
			if !other {
				wantExit(t, r, 0)
				if n := countSAN(e.document(), "ours"); n != 1 {
					t.Fatalf("our append is present %d times, want once: %s", n, r)
				}
				return
			}
			e.wantAppliedOnce(r, "ours", "other-writer", otherErr)
		})
	}
}

// TestLostCreateThenDeleted (E4): upgrade-start creates the upgrade state;
// the create commits, someone deletes the state, and the answer is lost.
// The state is absent, which does not mean that ours never landed: the
// history from before the create up to a fresh read of the collection
// (reached by the watch cache's bookmark) shows our copy. The plugin exits 0
// and does not create the state a second time.
func TestLostCreateThenDeleted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := s.admin.CoreV1().ConfigMaps(e.ns)
	list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kubeadmcfg-upgrade"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kubeadmcfg-upgrade", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p := startProxy(t)
	deleted := make(chan error, 1)
	p.SetFaults(testcluster.Faults{LoseAnswer: 1, MaxWrites: 1, Meanwhile: func() {
		deleted <- cms.Delete(context.Background(), "kubeadmcfg-upgrade", metav1.DeleteOptions{})
	}})
	r := e.pluginVia(p.Kubeconfig, "upgrade-start", "--to", "v1.37.3", "--timeout", "20s")
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("the proxy lost no answer: %s", r)
	}
	if lost := p.Lost(); len(lost) != 1 || !lost[0].Landed || lost[0].Method != "POST" {
		t.Fatalf("the proxy lost %v, want the answer to one committed create", lost)
	}
	wantExit(t, r, 0)
	if _, err := cms.Get(ctx, "kubeadmcfg-upgrade", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the upgrade state was created again: %v", err)
	}
	created := 0
	timeout := time.After(time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type == watch.Added && cm.Name == "kubeadmcfg-upgrade" {
				created++
			}
		case <-timeout:
			done = true
		}
	}
	if created != 1 {
		t.Fatalf("the upgrade state was created %d times, want once", created)
	}
}

// TestLeastPrivilegeWatchesWhatItWrites (E1): the Roles of deploy/rbac.yaml
// and of the upgrade-audit CronJob let their holder watch, by name from a
// resourceVersion (as the plugin resolves a lost write), exactly the
// ConfigMaps the Role lets it write, and no other.
func TestLeastPrivilegeWatchesWhatItWrites(t *testing.T) {
	e := newEnv(t)
	applyLeastPrivilegeRole(t, e.ns)
	audit := e.applyCronJobRole("auditor")
	ctx := context.Background()
	if _, err := s.admin.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadmcfg-upgrade"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who     rest.ImpersonationConfig
		allowed map[string]bool
	}{
		{rest.ImpersonationConfig{UserName: "operator-1", Groups: []string{"kubeadmcfg:operators"}},
			map[string]bool{"kubeadm-config": true, "kubeadmcfg-upgrade": true, "some-other-configmap": false}},
		{audit, map[string]bool{"kubeadm-config": false, "kubeadmcfg-upgrade": true}},
	} {
		for name, allowed := range tc.allowed {
			err := watchByName(t, tc.who, e.ns, name)
			if allowed != (err == nil) || (err != nil && !apierrors.IsForbidden(err)) {
				t.Errorf("%s watching %s: %v, want allowed %v", tc.who.UserName, name, err, allowed)
			}
		}
	}
}

// applyCronJobRole applies the Role of deploy/upgrade-audit-cronjob.yaml to
// the test's namespace, binds it to user, and returns how to act as user.
func (e *env) applyCronJobRole(user string) rest.ImpersonationConfig {
	e.t.Helper()
	data, err := os.ReadFile("../../deploy/upgrade-audit-cronjob.yaml")
	if err != nil {
		e.t.Fatal(err)
	}
	var role string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "\nkind: Role\n") {
			role = strings.ReplaceAll(doc, "namespace: kube-system", "namespace: "+e.ns)
		}
	}
	file := filepath.Join(e.t.TempDir(), "role.yaml")
	if err := os.WriteFile(file, []byte(role), 0o600); err != nil || role == "" {
		e.t.Fatalf("no Role in the CronJob manifest: %v", err)
	}
	wantExit(e.t, e.kubectl("apply", "-f", file), 0)
	wantExit(e.t, e.kubectl("create", "rolebinding", "audit-"+user, "--role", "kubeadmcfg-upgrade-audit", "--user", user), 0)
	return rest.ImpersonationConfig{UserName: user}
}

// watchByName starts, as who, the watch the plugin starts to resolve a lost
// write of name: by field selector, from a resourceVersion.
func watchByName(t *testing.T, who rest.ImpersonationConfig, ns, name string) error {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: s.cluster.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: testcluster.AdminContext}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = who
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.admin.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	timeout := int64(1)
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: list.ResourceVersion, TimeoutSeconds: &timeout})
	if err == nil {
		w.Stop()
	}
	return err
}
