package controlplane

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// These tests pin Apply's decisions on one node with a fake kubelet: it
// "runs" whatever manifest is on disk at the moment it is asked, and a
// component is healthy unless its manifest says "crash" (it keeps exiting)
// or "hang" (it never answers), or the test took it down. The proof against
// real components and a kubelet stand-in is the e2e suite's.

type fakeKubelet struct {
	dir string

	mu        sync.Mutex
	down      map[string]bool
	forbidden bool
}

func (k *fakeKubelet) manifest(pod string) ([]byte, error) {
	return os.ReadFile(filepath.Join(k.dir, pod+".yaml"))
}

func (k *fakeKubelet) Pod(_ context.Context, _, name string) (*corev1.Pod, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.forbidden {
		return nil, engine.APIError(apierrors.NewForbidden(corev1.Resource("pods"), name, errors.New("no")), "get", "pod")
	}
	data, err := k.manifest(strings.TrimSuffix(name, "-node-1"))
	if err != nil {
		return nil, nil
	}
	h := fnv.New32a()
	_, _ = h.Write(data)
	pod := &corev1.Pod{}
	pod.Annotations = map[string]string{ConfigHashAnnotation: fmt.Sprintf("%x", h.Sum32())}
	ready := corev1.ConditionTrue
	status := corev1.ContainerStatus{Ready: true}
	if strings.Contains(string(data), "crash") {
		ready, status.Ready, status.RestartCount = corev1.ConditionFalse, false, 1
		status.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{status}
	return pod, nil
}

// ServeHTTP is every component's probe: /<pod name>.
func (k *fakeKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pod := strings.TrimPrefix(r.URL.Path, "/")
	k.mu.Lock()
	down := k.down[pod]
	k.mu.Unlock()
	data, _ := k.manifest(pod)
	if down || strings.Contains(string(data), "crash") || strings.Contains(string(data), "hang") {
		http.Error(w, "not ok", http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (k *fakeKubelet) takeDown(pod string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.down[pod] = true
}

// manifestFor is a static Pod manifest whose probe is the fake's, with arg
// on its command line.
func manifestFor(c Component, port, arg string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: kube-system
spec:
  containers:
  - name: %[1]s
    command: [%[1]s, %[3]s]
    ports:
    - name: probe-port
      containerPort: %[2]s
    startupProbe:
      httpGet: {host: 127.0.0.1, port: probe-port, path: /%[1]s, scheme: HTTP}
`, c.PodName(), port, arg)
}

// recorder keeps the manifests backed up, in order.
type recorder struct {
	names []string
	fail  Component
}

func (r *recorder) BackupManifest(c Component, _ string, manifest []byte) (string, error) {
	if c == r.fail {
		return "", errors.New("disk full")
	}
	r.names = append(r.names, c.PodName()+":"+string(manifest[len(manifest)-20:]))
	return "backup-of-" + c.PodName(), nil
}

type node struct {
	t       *testing.T
	kubelet *fakeKubelet
	port    string
	backups *recorder
	events  []Event
}

func newNode(t *testing.T) *node {
	t.Helper()
	k := &fakeKubelet{dir: t.TempDir(), down: map[string]bool{}}
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	n := &node{t: t, kubelet: k, port: u.Port(), backups: &recorder{}}
	for _, c := range Components() {
		n.write(c, "--v=0")
	}
	return n
}

func (n *node) write(c Component, arg string) {
	if err := os.WriteFile(filepath.Join(n.kubelet.dir, c.File()), manifestFor(c, n.port, arg), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) read(c Component) string {
	data, err := os.ReadFile(filepath.Join(n.kubelet.dir, c.File()))
	if err != nil {
		n.t.Fatal(err)
	}
	return string(data)
}

// apply renders args (component -> command-line argument) and applies them.
func (n *node) apply(args map[Component]string, mutate ...func(*Options)) ([]Outcome, error) {
	n.t.Helper()
	rendered := map[Component][]byte{}
	for _, c := range Components() {
		arg, ok := args[c]
		if !ok {
			arg = "--v=0"
		}
		rendered[c] = manifestFor(c, n.port, arg)
	}
	plan, err := NewPlan(n.kubelet.dir, rendered, Components())
	if err != nil {
		n.t.Fatal(err)
	}
	opts := Options{Node: "node-1", Pods: n.kubelet, Backup: n.backups, Wait: 500 * time.Millisecond,
		Interval: 10 * time.Millisecond, Settle: 20 * time.Millisecond,
		Progress: func(e Event) { n.events = append(n.events, e) }}
	for _, m := range mutate {
		m(&opts)
	}
	return Apply(context.Background(), plan, opts)
}

func (n *node) wantManifests(want map[Component]string) {
	n.t.Helper()
	for _, c := range Components() {
		arg, ok := want[c]
		if !ok {
			arg = "--v=0"
		}
		if got := n.read(c); got != string(manifestFor(c, n.port, arg)) {
			n.t.Errorf("%s manifest is not the one with %s:\n%s", c.PodName(), arg, got)
		}
	}
}

func (n *node) kinds(c Component) []EventKind {
	var out []EventKind
	for _, e := range n.events {
		if e.Component == c && e.Kind != EventStatus {
			out = append(out, e.Kind)
		}
	}
	return out
}

func TestApplyChangesOnlyWhatChanged(t *testing.T) {
	n := newNode(t)
	outcomes, err := n.apply(map[Component]string{APIServer: "--v=2", Scheduler: "--v=3"})
	if err != nil {
		t.Fatal(err)
	}
	n.wantManifests(map[Component]string{APIServer: "--v=2", Scheduler: "--v=3"})
	for _, o := range outcomes {
		if o.Replaced != (o.Component != ControllerManager) || o.RolledBack {
			t.Errorf("%+v", o)
		}
	}
	// Backed up in order, each before its replacement; the unchanged
	// controller-manager not at all.
	if diff := cmp.Diff([]string{"kube-apiserver:" + tail(manifestFor(APIServer, n.port, "--v=0")),
		"kube-scheduler:" + tail(manifestFor(Scheduler, n.port, "--v=0"))}, n.backups.names); diff != "" {
		t.Errorf("backups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]EventKind{EventReplacing, EventWaiting, EventHealthy}, n.kinds(APIServer)); diff != "" {
		t.Errorf("kube-apiserver events (-want +got):\n%s", diff)
	}
	if len(n.kinds(ControllerManager)) != 0 {
		t.Errorf("the unchanged controller-manager was touched: %v", n.kinds(ControllerManager))
	}
}

func tail(b []byte) string { return string(b[len(b)-20:]) }

func TestApplyRollsBackEveryChangedComponent(t *testing.T) {
	n := newNode(t)
	_, err := n.apply(map[Component]string{APIServer: "--v=2", ControllerManager: "--crash", Scheduler: "--v=3"})
	var failed *FailedError
	if exitcode.FromError(err) != exitcode.RolledBack || !errors.As(err, &failed) {
		t.Fatalf("want exit 8, got %d: %v", exitcode.FromError(err), err)
	}
	var crash *CrashLoopError
	if !errors.As(err, &crash) || crash.Component != ControllerManager {
		t.Errorf("the cause is not the controller-manager's crash loop: %v", err)
	}
	if diff := cmp.Diff([]Component{APIServer, ControllerManager}, failed.RolledBack); diff != "" {
		t.Errorf("rolled back (-want +got):\n%s", diff)
	}
	// Every manifest is the previous one again; the scheduler was never
	// reached.
	n.wantManifests(nil)
	if len(n.kinds(Scheduler)) != 0 {
		t.Errorf("the scheduler was touched: %v", n.kinds(Scheduler))
	}
	if got := err.Error(); got != "kube-controller-manager keeps exiting with its new manifest (exit code 0, 1 restarts by the kubelet); "+
		"rolled back kube-apiserver, kube-controller-manager: the node is back on its previous configuration" {
		t.Errorf("message: %s", got)
	}
}

func TestApplyUnhealthyWithinWaitIsRolledBack(t *testing.T) {
	n := newNode(t)
	_, err := n.apply(map[Component]string{APIServer: "--hang"})
	var unhealthy *UnhealthyError
	if exitcode.FromError(err) != exitcode.RolledBack || !errors.As(err, &unhealthy) {
		t.Fatalf("want exit 8 for a component that never answers, got %d: %v", exitcode.FromError(err), err)
	}
	n.wantManifests(nil)
}

func TestApplyRollbackThatStaysDownExits9(t *testing.T) {
	n := newNode(t)
	opts := func(o *Options) {
		progress := o.Progress
		o.Progress = func(e Event) {
			progress(e)
			if e.Kind == EventRollingBack && e.Component == APIServer {
				n.kubelet.takeDown("kube-apiserver")
			}
		}
	}
	_, err := n.apply(map[Component]string{APIServer: "--crash"}, opts)
	var rb *RollbackError
	if exitcode.FromError(err) != exitcode.RollbackFailed || !errors.As(err, &rb) {
		t.Fatalf("want exit 9, got %d: %v", exitcode.FromError(err), err)
	}
	if diff := cmp.Diff([]Component{APIServer}, rb.Down); diff != "" {
		t.Errorf("down (-want +got):\n%s", diff)
	}
	if !strings.Contains(err.Error(), "the rollback failed: kube-apiserver may be down") {
		t.Errorf("message: %v", err)
	}
	n.wantManifests(nil) // the previous manifest is in place, even so
}

// An error before the first replace changed nothing: it keeps its own
// exit code and never claims a rollback.
func TestApplyErrorBeforeAnyChangeIsNotARollback(t *testing.T) {
	n := newNode(t)
	n.backups.fail = APIServer
	_, err := n.apply(map[Component]string{APIServer: "--v=2"})
	if code := exitcode.FromError(err); code == exitcode.RolledBack || code == exitcode.RollbackFailed || err == nil {
		t.Fatalf("exit %d: %v", code, err)
	}
	n.wantManifests(nil)

	n.kubelet.forbidden = true
	_, err = n.apply(map[Component]string{APIServer: "--v=2"})
	if code := exitcode.FromError(err); code != exitcode.Forbidden {
		t.Fatalf("unreadable mirror Pods: exit %d: %v", code, err)
	}
	n.wantManifests(nil)
}

// A wait too short to ever confirm a component (Settle + 2 × Interval,
// here 40ms) is refused before anything is read or replaced (review R2).
func TestApplyRefusesAWaitThatCannotConfirm(t *testing.T) {
	n := newNode(t)
	_, err := n.apply(map[Component]string{APIServer: "--v=2"}, func(o *Options) { o.Wait = 39 * time.Millisecond })
	if exitcode.FromError(err) != exitcode.Usage || err.Error() != "a wait of 39ms cannot confirm a component healthy: it takes at least 40ms" {
		t.Fatalf("exit %d: %v", exitcode.FromError(err), err)
	}
	n.wantManifests(nil)
	if len(n.events) != 0 || len(n.backups.names) != 0 {
		t.Errorf("events %v, backups %v", n.events, n.backups.names)
	}
}

// An unexpected error once something changed is rolled back like a
// failed component, and says what it was.
func TestApplyErrorAfterAChangeIsRolledBack(t *testing.T) {
	n := newNode(t)
	n.backups.fail = Scheduler
	_, err := n.apply(map[Component]string{APIServer: "--v=2", Scheduler: "--v=3"})
	if exitcode.FromError(err) != exitcode.RolledBack || !strings.HasPrefix(err.Error(), "back up the kube-scheduler manifest: disk full; rolled back kube-apiserver") {
		t.Fatalf("exit %d: %v", exitcode.FromError(err), err)
	}
	n.wantManifests(nil)
}

func TestApplyNoRollback(t *testing.T) {
	n := newNode(t)
	_, err := n.apply(map[Component]string{APIServer: "--crash"}, func(o *Options) { o.NoRollback = true })
	var nr *NotRolledBackError
	if exitcode.FromError(err) != exitcode.Failure || !errors.As(err, &nr) {
		t.Fatalf("exit %d: %v", exitcode.FromError(err), err)
	}
	n.wantManifests(map[Component]string{APIServer: "--crash"})
}

func TestApplyNeedsAMirrorPod(t *testing.T) {
	n := newNode(t)
	_, err := n.apply(map[Component]string{APIServer: "--v=2"}, func(o *Options) { o.Node = "another-node" })
	if exitcode.FromError(err) != exitcode.NotFound || !strings.Contains(err.Error(), "no mirror Pod kube-system/kube-apiserver-another-node") {
		t.Fatalf("exit %d: %v", exitcode.FromError(err), err)
	}
	n.wantManifests(nil)
}

// The temporary file of an atomic replace is a dot-file, which the kubelet
// ignores, and none is left behind.
func TestReplaceManifestLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kube-apiserver.yaml")
	if err := replaceManifest(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "kube-apiserver.yaml" {
		t.Fatalf("left: %v", entries)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}

func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	var busy *BusyError
	if _, err := Lock(dir); !errors.As(err, &busy) {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again()
}
