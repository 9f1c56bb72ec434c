package reconfigure

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
)

// testNode is a control-plane node for Run, without a kubelet or a real
// kubeadm: a manifests directory whose components are healthy (their
// mirror Pods are Ready in a fake API, their probes answer on a local
// server), and a stand-in for kubeadm that "renders" the manifests the test
// put in its directory and logs how it was called. Run's decisions are
// pinned with it; that the real kubeadm renders what these tests assume is
// the e2e suite's to show (TestReconfigure).
type testNode struct {
	t       *testing.T
	dir     string // the manifests directory
	kubeadm string
	out     string // what the stand-in renders, and its log
	port    string
	client  *fake.Clientset
	store   *backup.Store
}

// nodeName is the test node's name: its mirror Pods are <pod>-cp-0.
const nodeName = "cp-0"

func newTestNode(t *testing.T, doc string) *testNode {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the kubeadm stand-in is a shell script")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	n := &testNode{t: t, dir: t.TempDir(), out: t.TempDir(), port: u.Port(), client: fake.NewClientset(),
		store: &backup.Store{Dir: t.TempDir()}}
	n.kubeadm = filepath.Join(n.out, "kubeadm")
	script := fmt.Sprintf(`#!/bin/sh
# kubeadm version -o short | kubeadm init phase (control-plane C | etcd local) --config F --dry-run
out=%q
echo "$*" >>"$out/calls"
case "$1 $3" in
"version "*) cat "$out/version" ;;
"init control-plane") cp "$out/kube-$4.yaml" "$KUBEADM_INIT_DRYRUN_DIR/" ;;
"init etcd") cp "$out/etcd.yaml" "$KUBEADM_INIT_DRYRUN_DIR/" ;;
*) echo "unexpected: $*" >&2; exit 1 ;;
esac
`, n.out)
	n.writeFile(n.kubeadm, script, 0o755)
	n.writeFile(filepath.Join(n.out, "version"), "v1.37.2\n", 0o600)
	for _, c := range controlplane.Components() {
		m := n.manifest(c, "v1.37.2", "--v=0")
		n.writeFile(filepath.Join(n.dir, c.File()), m, 0o600)
		n.writeFile(filepath.Join(n.out, c.File()), m, 0o600)
		n.mirrorPod(c.PodName())
	}
	n.create(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config", UID: "uid-1", ResourceVersion: "815"},
		Data:       map[string]string{engine.DefaultKey: doc},
	})
	return n
}

func (n *testNode) writeFile(path, data string, mode os.FileMode) {
	n.t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		n.t.Fatal(err)
	}
}

// manifest is a static Pod manifest of c with image tag tag and arg on its
// command line, whose probe is the test's server.
func (n *testNode) manifest(c controlplane.Component, tag, arg string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: kube-system
spec:
  containers:
  - name: %[1]s
    image: registry.k8s.io/%[1]s:%[2]s
    command: [%[1]s, %[3]s]
    startupProbe:
      httpGet: {host: 127.0.0.1, port: %[4]s, path: /livez, scheme: HTTP}
`, c.PodName(), tag, arg, n.port)
}

// etcdManifest is a local etcd member's manifest: initialCluster and state
// are what etcd reads only when its data directory is empty.
func (n *testNode) etcdManifest(initialCluster, state, snapshotCount string) string {
	args := []string{"etcd", "--name=cp-0", "--initial-cluster=" + initialCluster}
	if state != "" {
		args = append(args, "--initial-cluster-state="+state)
	}
	args = append(args, "--snapshot-count="+snapshotCount)
	var command strings.Builder
	for _, a := range args {
		command.WriteString("    - " + a + "\n") // one item a line, as kubeadm writes it
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.7.0-0
    command:
%s    startupProbe:
      httpGet: {host: 127.0.0.1, port: %s, path: /readyz, scheme: HTTP}
`, command.String(), n.port)
}

// running puts a manifest in the manifests directory; rendered has the
// stand-in render it.
func (n *testNode) running(file, data string)  { n.writeFile(filepath.Join(n.dir, file), data, 0o600) }
func (n *testNode) rendered(file, data string) { n.writeFile(filepath.Join(n.out, file), data, 0o600) }

func (n *testNode) create(obj *corev1.ConfigMap) {
	n.t.Helper()
	if _, err := n.client.CoreV1().ConfigMaps(obj.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// mirrorPod publishes a Ready mirror Pod, as the kubelet does.
func (n *testNode) mirrorPod(pod string) {
	n.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: pod + "-" + nodeName,
			Annotations: map[string]string{controlplane.ConfigHashAnnotation: "hash-of-" + pod}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if _, err := n.client.CoreV1().Pods("kube-system").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// calls is how the stand-in was called, one line per call.
func (n *testNode) calls() string {
	data, _ := os.ReadFile(filepath.Join(n.out, "calls"))
	return string(data)
}

// call is one Run on the node: the node as every run sees it, and what
// this run does.
type call struct {
	Node
	Request
}

// runc runs c.
func runc(ctx context.Context, c call) (*Report, error) { return Run(ctx, c.Node, c.Request) }

// request is a run on the node; mutate changes it.
func (n *testNode) request(mutate ...func(*call)) call {
	target := engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey}
	c := call{
		Node: Node{Config: engine.New(n.client, target, engine.Options{Timeout: 5 * time.Second}), Store: n.store, Keep: 5,
			NodeConfig:   clusterconfig.NodeConfig{Name: nodeName, AdvertiseAddress: "192.0.2.11", BindPort: 6443, ImagePullPolicy: "IfNotPresent"},
			ManifestsDir: n.dir, Kubeadm: n.kubeadm},
		Request: Request{Wait: 5 * time.Minute},
	}
	for _, m := range mutate {
		m(&c)
	}
	return c
}

// wantManifests checks that the running manifests are still those the
// node started with.
func (n *testNode) wantManifests() {
	n.t.Helper()
	for _, c := range controlplane.Components() {
		data, err := os.ReadFile(filepath.Join(n.dir, c.File()))
		if err != nil {
			n.t.Fatal(err)
		}
		if string(data) != n.manifest(c, "v1.37.2", "--v=0") {
			n.t.Errorf("%s changed:\n%s", c.File(), data)
		}
	}
}
