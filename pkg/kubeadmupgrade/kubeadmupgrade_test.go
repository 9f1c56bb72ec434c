package kubeadmupgrade

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/etcd"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// These tests run a step on one node with stand-ins: a kubeadm script that
// logs each call and does what the phase does to the node's files (the
// control-plane phase backs the manifests up, as kubeadm does, and moves
// their images to the target), a fake kubelet that "runs" whatever
// manifest is on disk (its mirror Pod carries the manifest's image; a
// manifest that says "crash" keeps exiting), and a fake API server. The
// proof against the real kubeadm and control plane is the e2e suite's.

const (
	from = "v1.36.3"
	to   = "v1.37.2"
	// The etcd of each, as kubeadm's manifests tag it.
	etcdFrom = "3.6.8-0"
	etcdTo   = "3.7.0-0"
)

// liveDocument is kubeadm-config as the upload-config dry run of
// testdata/dry-run.txt read it.
const liveDocument = `apiServer:
  extraArgs:
  - name: audit-log-maxage
    value: "30"
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controlPlaneEndpoint: 192.0.2.10:8443
controllerManager:
  extraArgs:
  - name: node-cidr-mask-size
    value: "24"
dns: {}
encryptionAlgorithm: RSA-2048
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
networking:
  dnsDomain: cluster.local
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
proxy: {}
scheduler: {}
`

// kubeadmScript is the kubeadm stand-in. It logs its words (the command
// line up to its first flag) and flags, fails a call whose words are in
// $dir/fail (once, removing the line), and in the control-plane phase
// backs up the manifests into tmp as kubeadm names its backups (unless
// $dir/no-backup) and moves their images to the target, adding "crash" to
// kube-apiserver's command when $dir/crash exists.
const kubeadmScript = `words=""
for a in "$@"; do case "$a" in -*) break;; esac; words="$words $a"; done
words="${words# }"
case "$words" in
"upgrade apply phase upload-config kubeadm") cat "$dir/dry-run.txt"; exit 0;;
esac
echo "$words|$*" >>"$dir/log"
if grep -qx "$words" "$dir/fail" 2>/dev/null; then
	grep -vx "$words" "$dir/fail" >"$dir/fail.new"; mv "$dir/fail.new" "$dir/fail"
	echo "[upgrade] doing $words"; echo "error execution phase $words: failed on purpose" >&2; exit 1
fi
mkdir "$tmp/kubeadm-$(echo "$words" | tr ' ' '-')-$(date +%Y-%m-%d-%H-%M-%S)" || exit 1
case "$words" in
"upgrade "*" phase control-plane")
	if [ ! -f "$dir/no-backup" ]; then
		b="$tmp/kubeadm-backup-manifests-$(date +%Y-%m-%d-%H-%M-%S)"
		mkdir -p "$b" && cp "$manifests"/*.yaml "$b/" || exit 1
	fi
	for f in "$manifests"/*.yaml; do sed -i "s/:` + from + `\$/:` + to + `/" "$f"; done
	[ -f "$manifests/etcd.yaml" ] && sed -i "s/:` + etcdFrom + `\$/:` + etcdTo + `/" "$manifests/etcd.yaml"
	[ -f "$dir/crash" ] && sed -i "s/--v=0/crash/" "$manifests/kube-apiserver.yaml"
	;;
esac
exit 0
`

type testNode struct {
	t         *testing.T
	dir       string // the stand-ins' files
	manifests string
	tmp       string
	port      string // the fake kubelet's probes
	client    *fake.Clientset
	node      Node
	phases    []string // announced to Request.Phase
	started   []proc.Identity

	mu      sync.Mutex
	kubelet corev1.Node
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the stand-ins are shell scripts on Linux")
	}
	t.Parallel()
	root := t.TempDir()
	n := &testNode{t: t, dir: t.TempDir(), manifests: filepath.Join(root, "etc", "kubernetes", "manifests")}
	n.tmp = TmpDir(n.manifests)
	for _, d := range []string{n.manifests, n.tmp, filepath.Join(n.dir, to)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dryRun, err := os.ReadFile(filepath.Join("..", "uploadconfig", "testdata", "dry-run-upgraded-from-1.36.3.txt"))
	if err != nil {
		t.Fatal(err)
	}
	n.write(filepath.Join(n.dir, "dry-run.txt"), string(dryRun))
	script := fmt.Sprintf("#!/bin/sh\ndir=%s\nmanifests=%s\ntmp=%s\n%s", n.dir, n.manifests, n.tmp, kubeadmScript)
	if err := os.WriteFile(filepath.Join(n.dir, to, "kubeadm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	probes := httptest.NewServer(http.HandlerFunc(n.probe))
	t.Cleanup(probes.Close)
	u, _ := url.Parse(probes.URL)
	n.port = u.Port()
	for _, c := range controlplane.Components() {
		n.write(filepath.Join(n.manifests, c.File()), manifest(c, u.Port(), from))
	}

	n.client = fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config", UID: "uid-1", ResourceVersion: "1"},
		Data:       map[string]string{engine.DefaultKey: liveDocument},
	})
	n.client.PrependReactor("get", "pods", n.mirrorPod)
	n.client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		return true, &corev1.NodeList{Items: []corev1.Node{n.kubelet}}, nil
	})
	n.node = Node{
		Node: reconfigure.Node{
			Config: engine.New(n.client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
				engine.Options{Validation: engine.ValidationIgnore}),
			Store: &backup.Store{Dir: t.TempDir()}, NodeConfig: clusterconfig.NodeConfig{Name: "cp-0", PatchesDir: "/etc/kubernetes/patches"},
			ManifestsDir: n.manifests, Identity: "agent/cp-0/1",
		},
		Env: Env{Kubeadms: Kubeadms{Template: filepath.Join(n.dir, "{version}", "kubeadm")}},
	}
	return n
}

// manifest is a static Pod manifest of c running release, whose probe is
// the fake kubelet's.
func manifest(c controlplane.Component, port, release string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: kube-system
spec:
  containers:
  - name: %[1]s
    image: registry.k8s.io/%[1]s:%[3]s
    command: [%[1]s, --v=0]
    ports:
    - name: probe-port
      containerPort: %[2]s
    startupProbe:
      httpGet: {host: 127.0.0.1, port: probe-port, path: /%[1]s, scheme: HTTP}
`, c.PodName(), port, release)
}

func (n *testNode) write(path, content string) {
	n.t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *testNode) read(path string) string {
	n.t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		n.t.Fatal(err)
	}
	return string(data)
}

// probe answers a component's probe, unless its manifest says crash.
func (n *testNode) probe(w http.ResponseWriter, r *http.Request) {
	data, _ := os.ReadFile(filepath.Join(n.manifests, strings.TrimPrefix(r.URL.Path, "/")+".yaml"))
	if strings.Contains(string(data), "crash") {
		http.Error(w, "not ok", http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "ok")
}

// mirrorPod is the kubelet's mirror Pod of the manifest on disk.
func (n *testNode) mirrorPod(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	name := strings.TrimSuffix(a.(k8stesting.GetAction).GetName(), "-cp-0")
	data, err := os.ReadFile(filepath.Join(n.manifests, name+".yaml"))
	if err != nil {
		return false, nil, nil
	}
	m, err := controlplane.ParseManifest(data)
	if err != nil {
		return true, nil, err
	}
	h := fnv.New32a()
	_, _ = h.Write(data)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name + "-cp-0",
		Annotations: map[string]string{controlplane.ConfigHashAnnotation: fmt.Sprintf("%x", h.Sum32())}},
		Spec: m.Pod.Spec}
	ready, status := corev1.ConditionTrue, corev1.ContainerStatus{Ready: true}
	if strings.Contains(string(data), "crash") {
		ready, status.Ready, status.RestartCount = corev1.ConditionFalse, false, 3
		status.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{status}
	return true, pod, nil
}

// request is a step of kind from its start.
func (n *testNode) request(kind Kind) Request {
	return Request{Kind: kind, Version: to, From: from, Wait: 30 * time.Second,
		Phase: func(p string) error {
			n.phases = append(n.phases, p)
			return nil
		},
		Started: func(id proc.Identity) { n.started = append(n.started, id) },
	}
}

// fail makes the stand-in fail the call with these words once.
func (n *testNode) fail(words string) {
	f, err := os.OpenFile(filepath.Join(n.dir, "fail"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, words)
}

// calls are the stand-in's calls so far: their words.
func (n *testNode) calls() []string {
	data, _ := os.ReadFile(filepath.Join(n.dir, "log"))
	var words []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if w, _, ok := strings.Cut(l, "|"); ok {
			words = append(words, w)
		}
	}
	return words
}

// flags are the flags of the stand-in's call with these words.
func (n *testNode) flags(words string) string {
	data, _ := os.ReadFile(filepath.Join(n.dir, "log"))
	for _, l := range strings.Split(string(data), "\n") {
		if w, all, ok := strings.Cut(l, "|"); ok && w == words {
			return strings.TrimSpace(strings.TrimPrefix(all, words))
		}
	}
	return ""
}

func (n *testNode) document() string {
	cm, err := n.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return cm.Data[engine.DefaultKey]
}

func (n *testNode) manifests3() map[string]string {
	out := map[string]string{}
	for _, c := range controlplane.Components() {
		out[c.PodName()] = n.read(filepath.Join(n.manifests, c.File()))
	}
	return out
}

func TestApplyRunsEveryPhaseOnceInOrderThenTheGate(t *testing.T) {
	n := newTestNode(t)
	rep, err := Run(context.Background(), n.node, n.request(Apply))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"upgrade apply phase preflight", "upgrade apply phase control-plane", "upgrade apply phase upload-config kubelet",
		"upgrade apply phase kubelet-config", "upgrade apply phase bootstrap-token", "upgrade apply phase addon all", "upgrade apply phase post-upgrade"}
	if diff := cmp.Diff(want, n.calls()); diff != "" {
		t.Errorf("kubeadm's calls (-want +got):\n%s", diff)
	}
	wantPhases := []string{ControlPlane, UploadConfig, "kubelet-config", "bootstrap-token", "addon all", "post-upgrade", Gate}
	if diff := cmp.Diff(wantPhases, n.phases); diff != "" {
		t.Errorf("phases announced (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append([]string{Preflight}, wantPhases...), rep.Phases); diff != "" {
		t.Errorf("Report.Phases (-want +got):\n%s", diff)
	}
	if len(n.started) != len(want) || n.started[0].PID <= 0 {
		t.Errorf("Started got %v, want one identity per kubeadm call (%d)", n.started, len(want))
	}
	config := filepath.Join(n.tmp, ConfigFile)
	for words, flags := range map[string]string{
		"upgrade apply phase preflight":      "--config " + config + " --yes",
		"upgrade apply phase control-plane":  "--config " + config + " --patches /etc/kubernetes/patches",
		"upgrade apply phase addon all":      "--config " + config + " --patches /etc/kubernetes/patches",
		"upgrade apply phase post-upgrade":   "--config " + config,
		"upgrade apply phase kubelet-config": "--config " + config + " --patches /etc/kubernetes/patches",
	} {
		if got := n.flags(words); got != flags {
			t.Errorf("%s: flags %q, want %q", words, got, flags)
		}
	}
	if !rep.NoReturn || !strings.Contains(n.document(), "kubernetesVersion: "+to) {
		t.Errorf("kubeadm-config does not say %s after upload-config (NoReturn %v):\n%s", to, rep.NoReturn, n.document())
	}
	if got := n.read(config); got != string(Config(to, nil, 30*time.Second)) {
		t.Errorf("the UpgradeConfiguration written:\n%s", got)
	}
	for name, m := range n.manifests3() {
		if !strings.Contains(m, ":"+to) {
			t.Errorf("%s does not run %s:\n%s", name, to, m)
		}
	}
}

func TestNodeRunsEveryPhaseOnceInOrder(t *testing.T) {
	n := newTestNode(t)
	req := n.request(Upgrade)
	req.NoReturn = true
	if _, err := Run(context.Background(), n.node, req); err != nil {
		t.Fatal(err)
	}
	want := []string{"upgrade node phase preflight", "upgrade node phase control-plane", "upgrade node phase kubelet-config",
		"upgrade node phase addon all", "upgrade node phase post-upgrade"}
	if diff := cmp.Diff(want, n.calls()); diff != "" {
		t.Errorf("kubeadm's calls (-want +got):\n%s", diff)
	}
	if got := n.flags("upgrade node phase preflight"); strings.Contains(got, "--yes") {
		t.Errorf("node's preflight takes no --yes: %q", got)
	}
	if strings.Contains(n.document(), "kubernetesVersion: "+to) {
		t.Errorf("another node's step wrote kubeadm-config")
	}
}

// A step that failed past the point of no return stays as it is; run
// again from the phase it stopped in, it runs that phase and those after
// it, each once, and never the ones before.
func TestAStepRunAgainStartsAtThePhaseItStoppedIn(t *testing.T) {
	n := newTestNode(t)
	n.fail("upgrade apply phase kubelet-config")
	rep, err := Run(context.Background(), n.node, n.request(Apply))
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != "kubelet-config" || failed.Back || !rep.NoReturn {
		t.Fatalf("got %v (%#v), NoReturn %v; want kubelet-config failed, the node left for a forward recovery", err, failed, rep.NoReturn)
	}
	if !strings.Contains(failed.Output, "failed on purpose") || strings.Contains(failed.Error(), "failed on purpose") {
		t.Errorf("the output is kept apart from the message: %q / %q", failed.Output, failed.Error())
	}
	before := len(n.calls())
	req := n.request(Apply)
	req.StartPhase, req.NoReturn = StartPhase(Apply, failed.Phase), true
	n.phases = nil
	if _, err := Run(context.Background(), n.node, req); err != nil {
		t.Fatal(err)
	}
	want := []string{"upgrade apply phase kubelet-config", "upgrade apply phase bootstrap-token", "upgrade apply phase addon all", "upgrade apply phase post-upgrade"}
	if diff := cmp.Diff(want, n.calls()[before:]); diff != "" {
		t.Errorf("kubeadm's calls run again (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bootstrap-token", "addon all", "post-upgrade", Gate}, n.phases); diff != "" {
		t.Errorf("phases announced (-want +got):\n%s", diff)
	}
}

func TestStartPhase(t *testing.T) {
	for _, tc := range []struct {
		kind        Kind
		phase, want string
	}{
		{Apply, "addon all", "addon all"},
		{Apply, Gate, Preflight}, // the gate checks what the phases before it did: they run again
		{Apply, "no-such-phase", Preflight},
		{Upgrade, "bootstrap-token", Preflight}, // not a phase of upgrade node
		{Upgrade, "post-upgrade", "post-upgrade"},
		{KubeletStep, Gate, KubeletPhase},
		{KubeletStep, "", KubeletPhase},
	} {
		if got := StartPhase(tc.kind, tc.phase); got != tc.want {
			t.Errorf("StartPhase(%s, %q) = %q, want %q", tc.kind, tc.phase, got, tc.want)
		}
	}
}

// oldBackup plants what an earlier upgrade left in tmp: a manifest
// backup, older than any of this step's, whose manifests carry a marker.
func (n *testNode) oldBackup() {
	dir := filepath.Join(n.tmp, "kubeadm-backup-manifests-2025-06-01-00-00-00")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.t.Fatal(err)
	}
	for _, c := range controlplane.Components() {
		n.write(filepath.Join(dir, c.File()), strings.Replace(n.read(filepath.Join(n.manifests, c.File())), "--v=0", "--old-backup", 1))
	}
}

// The first node fails its control-plane gate: it is put back from the
// backup kubeadm made in this step, byte for byte what it ran, never from
// an earlier upgrade's.
func TestAFailedFirstNodeIsPutBackFromThisStepsBackup(t *testing.T) {
	n := newTestNode(t)
	n.oldBackup()
	before := n.manifests3()
	n.write(filepath.Join(n.dir, "crash"), "")
	_, err := Run(context.Background(), n.node, n.request(Apply))
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != ControlPlane || !failed.Back || failed.Unchanged {
		t.Fatalf("got %v (%#v), want control-plane failed and the node put back", err, failed)
	}
	if diff := cmp.Diff(before, n.manifests3()); diff != "" {
		t.Errorf("the manifests are not what the node ran (-before +after):\n%s", diff)
	}
	if strings.Contains(n.document(), "kubernetesVersion: "+to) {
		t.Errorf("kubeadm-config was written although the step failed before upload-config")
	}
}

// A first node that fails before kubeadm's control-plane phase changed
// anything has nothing to put back, whatever state its components are in:
// an earlier upgrade's backup stays where it is.
func TestAFailureBeforeTheControlPlanePutsNothingBack(t *testing.T) {
	n := newTestNode(t)
	n.oldBackup()
	n.write(filepath.Join(n.manifests, "kube-scheduler.yaml"), strings.Replace(n.read(filepath.Join(n.manifests, "kube-scheduler.yaml")), "--v=0", "crash", 1))
	before := n.manifests3()
	n.fail("upgrade apply phase preflight")
	req := n.request(Apply)
	_, err := Run(context.Background(), n.node, req)
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != Preflight || !failed.Back || !failed.Unchanged {
		t.Fatalf("got %v (%#v), want preflight failed and the node as it was, unchanged", err, failed)
	}
	if diff := cmp.Diff(before, n.manifests3()); diff != "" {
		t.Errorf("the manifests changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"upgrade apply phase preflight"}, n.calls()); diff != "" {
		t.Errorf("kubeadm's calls (-want +got):\n%s", diff)
	}
}

// Without a backup of this step to put back, the put-back fails, and says
// so: the node is not claimed back.
func TestAPutBackWithoutThisStepsBackupFails(t *testing.T) {
	n := newTestNode(t)
	n.oldBackup()
	n.write(filepath.Join(n.dir, "crash"), "")
	n.write(filepath.Join(n.dir, "no-backup"), "")
	_, err := Run(context.Background(), n.node, n.request(Apply))
	var putBack *PutBackError
	if !errors.As(err, &putBack) || putBack.Failure.Phase != ControlPlane || !strings.Contains(err.Error(), "no manifest backup of this step") {
		t.Fatalf("got %v, want a PutBackError: no backup of this step", err)
	}
	if m := n.read(filepath.Join(n.manifests, "kube-apiserver.yaml")); strings.Contains(m, "--old-backup") {
		t.Errorf("an earlier upgrade's backup was put back:\n%s", m)
	}
}

// A node past the point of no return is never put back.
func TestAFailurePastThePointOfNoReturnIsLeftForward(t *testing.T) {
	n := newTestNode(t)
	n.write(filepath.Join(n.dir, "crash"), "")
	req := n.request(Upgrade)
	req.NoReturn = true
	_, err := Run(context.Background(), n.node, req)
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != ControlPlane || failed.Back {
		t.Fatalf("got %v, want control-plane failed, the node left as it is", err)
	}
	if m := n.read(filepath.Join(n.manifests, "kube-apiserver.yaml")); !strings.Contains(m, ":"+to) {
		t.Errorf("the node was put back:\n%s", m)
	}
}

// The gate fails a step whose components do not run the target.
func TestTheGateChecksTheTarget(t *testing.T) {
	n := newTestNode(t)
	req := n.request(Upgrade)
	req.NoReturn, req.StartPhase = true, "post-upgrade" // the control plane was never upgraded
	req.Wait = 2 * time.Second
	_, err := Run(context.Background(), n.node, req)
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != Gate || !strings.Contains(err.Error(), "not "+to) {
		t.Fatalf("got %v, want the gate to fail: the manifests run %s", err, from)
	}
}

// kubeletRestartScript is the kubelet restart command's stand-in. It
// records the release it was asked for, takes $dir/kubelet-takes seconds
// when that file exists (saying so in $dir/kubelet-running), and fails
// when $dir/kubelet-fails exists. Told to stop (SIGTERM), it records it in
// $dir/kubelet-stopped, as the drop-in's install script stops its unit.
// It waits for its sleep with wait, which a trapped signal interrupts: a
// signal during a foreground command would run the trap only once that
// command ended.
const kubeletRestartScript = `echo "$KUBEADMCFG_KUBELET_VERSION" >>"$dir/kubelet"
sleeping=""
trap 'echo stopped >>"$dir/kubelet-stopped"; [ -z "$sleeping" ] || kill "$sleeping" 2>/dev/null; exit 1' TERM
if [ -f "$dir/kubelet-takes" ]; then
	sleep "$(cat "$dir/kubelet-takes")" >/dev/null 2>&1 &
	sleeping=$!
	touch "$dir/kubelet-running"
	wait "$sleeping"
fi
[ -f "$dir/kubelet-fails" ] && { echo 'no such package' >&2; exit 4; }
exit 0
`

// kubeletNode adds the kubelet's stand-ins: a restart command
// (kubeletRestartScript), a /healthz, and the Node the API shows.
func (n *testNode) kubeletNode(healthz http.HandlerFunc, reports string) {
	srv := httptest.NewServer(healthz)
	n.t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	config := filepath.Join(n.dir, "kubelet-config.yaml")
	n.write(config, fmt.Sprintf("healthzBindAddress: 127.0.0.1\nhealthzPort: %s\n", u.Port()))
	restart := filepath.Join(n.dir, "restart-kubelet")
	n.write(restart, fmt.Sprintf("#!/bin/sh\ndir=%s\n%s", n.dir, kubeletRestartScript))
	if err := os.Chmod(restart, 0o755); err != nil {
		n.t.Fatal(err)
	}
	n.node.Kubelet = Kubelet{Restart: []string{restart, "--now"}, Config: config}
	n.kubelet = corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0"}}
	n.kubelet.Status.NodeInfo.KubeletVersion = reports
	n.kubelet.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
}

func healthy(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }

func TestKubeletStepRestartsThenChecksTheKubelet(t *testing.T) {
	n := newTestNode(t)
	n.kubeletNode(healthy, to)
	rep, err := Run(context.Background(), n.node, n.request(KubeletStep))
	if err != nil {
		t.Fatal(err)
	}
	if got := n.read(filepath.Join(n.dir, "kubelet")); got != to+"\n" {
		t.Errorf("the restart command was asked for %q, want %s once", got, to)
	}
	if diff := cmp.Diff([]string{KubeletPhase, Gate}, rep.Phases); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if len(n.calls()) != 0 {
		t.Errorf("a kubelet step ran kubeadm: %v", n.calls())
	}
}

func TestKubeletStepFailures(t *testing.T) {
	t.Run("the restart command fails: its output is kept, the gate never runs", func(t *testing.T) {
		n := newTestNode(t)
		n.kubeletNode(healthy, from)
		n.write(filepath.Join(n.dir, "kubelet-fails"), "")
		_, err := Run(context.Background(), n.node, n.request(KubeletStep))
		var failed *PhaseError
		if !errors.As(err, &failed) || failed.Phase != KubeletPhase || failed.Back || failed.Output != "no such package" ||
			failed.Error() != "phase kubelet failed: the kubelet restart command exited 4" {
			t.Fatalf("got %v (%#v)", err, failed)
		}
		if len(n.phases) != 0 {
			t.Errorf("the gate was announced after a failed restart: %v", n.phases)
		}
	})
	t.Run("the Node reports the release it ran", func(t *testing.T) {
		n := newTestNode(t)
		n.kubeletNode(healthy, from)
		req := n.request(KubeletStep)
		req.Wait = 2 * time.Second
		_, err := Run(context.Background(), n.node, req)
		var failed *PhaseError
		if !errors.As(err, &failed) || failed.Phase != Gate || !strings.Contains(err.Error(), "node cp-0 reports kubelet "+from) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("the kubelet does not answer /healthz", func(t *testing.T) {
		n := newTestNode(t)
		n.kubeletNode(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) }, to)
		req := n.request(KubeletStep)
		req.Wait = 2 * time.Second
		_, err := Run(context.Background(), n.node, req)
		if !strings.Contains(fmt.Sprint(err), "answers 503") {
			t.Fatalf("got %v, want the /healthz answer named", err)
		}
	})
}

// The kubelet restart command has a bound of its own, not Wait, which
// bounds the gate after it: an install that takes longer than a
// component may take to come up is waited for, up to RestartTimeout.
func TestKubeletRestartHasABoundOfItsOwn(t *testing.T) {
	n := newTestNode(t)
	n.kubeletNode(healthy, to)
	n.write(filepath.Join(n.dir, "kubelet-takes"), "3")
	req := n.request(KubeletStep)
	req.Wait = time.Second
	if _, err := Run(context.Background(), n.node, req); err != nil {
		t.Fatalf("an install of 3s with a Wait of 1s: %v", err)
	}
	n.node.Kubelet.RestartTimeout = time.Second
	_, err := Run(context.Background(), n.node, req)
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != KubeletPhase ||
		err.Error() != "phase kubelet failed: the kubelet restart command did not finish within 1s" {
		t.Fatalf("an install of 3s with a RestartTimeout of 1s: got %v", err)
	}
}

// A kubelet restart command given up on (its bound passed, or the agent
// told to stop) is told to stop first (SIGTERM), so that it can stop the
// install it started outside its process group (the drop-in's systemd
// unit) before the step is recorded failed; it is killed only after
// RestartGrace.
func TestAKubeletRestartGivenUpOnIsToldToStop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout bool
		want    string
	}{
		{"its bound passes", true, "phase kubelet failed: the kubelet restart command did not finish within 2s"},
		{"the agent is told to stop", false, "phase kubelet failed: the kubelet restart command was interrupted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t)
			n.kubeletNode(healthy, to)
			n.write(filepath.Join(n.dir, "kubelet-takes"), "60")
			n.node.Kubelet.RestartGrace = 30 * time.Second
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.timeout {
				n.node.Kubelet.RestartTimeout = 2 * time.Second
			} else {
				go func() {
					for _, err := os.Stat(filepath.Join(n.dir, "kubelet-running")); err != nil; _, err = os.Stat(filepath.Join(n.dir, "kubelet-running")) {
						time.Sleep(10 * time.Millisecond)
					}
					cancel()
				}()
			}
			start := time.Now()
			_, err := Run(ctx, n.node, n.request(KubeletStep))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			if got, _ := os.ReadFile(filepath.Join(n.dir, "kubelet-stopped")); string(got) != "stopped\n" {
				t.Errorf("the restart command wrote %q when given up on, want \"stopped\\n\": it was killed without being told to stop", got)
			}
			if took := time.Since(start); took >= 30*time.Second {
				t.Errorf("the step took %s: the command, which ends when told to stop, was waited for until RestartGrace", took)
			}
			if len(n.phases) != 0 {
				t.Errorf("the gate was announced after a failed restart: %v", n.phases)
			}
		})
	}
}

// kubeadm names the directory each run of a phase makes in
// /etc/kubernetes/tmp by the second it starts in, and fails when it
// exists. A phase run again at once (upgrade-resume right after the
// failure) must not start in the second its last run was in: three runs in
// a row leave at least two in one second unless the step waits.
func TestAPhaseRunAgainWaitsForANewSecond(t *testing.T) {
	n := newTestNode(t)
	s := &step{node: n.node, req: n.request(Upgrade), rep: &Report{}}
	for i := range 3 {
		if err := s.kubeadm(context.Background(), "upgrade", "node", "phase", "kubelet-config"); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(n.tmp, "kubeadm-upgrade-node-phase-kubelet-config-*")); len(dirs) != 3 {
		t.Fatalf("want a directory of each of the 3 runs, got %v", dirs)
	}
}

// An interrupted step ends in the phase it was in, and says so.
func TestAnInterruptedStepStopsBeforeItsNextPhase(t *testing.T) {
	n := newTestNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	req := n.request(Upgrade)
	req.NoReturn = true
	req.Phase = func(p string) error {
		if p == "kubelet-config" {
			cancel()
		}
		return nil
	}
	_, err := Run(ctx, n.node, req)
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != "kubelet-config" || !errors.Is(err, errInterrupted) {
		t.Fatalf("got %v, want interrupted in kubelet-config", err)
	}
	if diff := cmp.Diff([]string{"upgrade node phase preflight", "upgrade node phase control-plane"}, n.calls()); diff != "" {
		t.Errorf("kubeadm's calls (-want +got):\n%s", diff)
	}
}

// Housekeeping keeps the newest KeepBackups of each kind of backup.
func TestAStepKeepsTheNewestBackups(t *testing.T) {
	n := newTestNode(t)
	n.node.KeepBackups = 2
	for _, d := range []string{"kubeadm-backup-etcd-2025-01-01-00-00-00", "kubeadm-backup-etcd-2025-02-01-00-00-00", "kubeadm-backup-etcd-2025-03-01-00-00-00"} {
		if err := os.Mkdir(filepath.Join(n.tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	req := n.request(Upgrade)
	req.NoReturn = true
	if _, err := Run(context.Background(), n.node, req); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(n.tmp, "kubeadm-backup-etcd-*"))
	if diff := cmp.Diff([]string{filepath.Join(n.tmp, "kubeadm-backup-etcd-2025-02-01-00-00-00"), filepath.Join(n.tmp, "kubeadm-backup-etcd-2025-03-01-00-00-00")}, left); diff != "" {
		t.Errorf("backups left (-want +got):\n%s", diff)
	}
}

// Once kubeadm-config says the target, a failure of the rest of the
// upload-config phase (kubeadm's upload of the kubelet's configuration)
// is past the point of no return: the node is not put back.
func TestAFailureAfterKubeadmConfigWasWrittenIsNotPutBack(t *testing.T) {
	n := newTestNode(t)
	n.fail("upgrade apply phase upload-config kubelet")
	rep, err := Run(context.Background(), n.node, n.request(Apply))
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != UploadConfig || failed.Back || !rep.NoReturn {
		t.Fatalf("got %v (%#v), NoReturn %v; want upload-config failed, the node left for a forward recovery", err, failed, rep.NoReturn)
	}
	if m := n.read(filepath.Join(n.manifests, "kube-apiserver.yaml")); !strings.Contains(m, ":"+to) {
		t.Errorf("the node was put back after kubeadm-config said %s:\n%s", to, m)
	}
}

// loseAnswer makes the API server land the next write of kubeadm-config
// and answer it with a refusal, as a write whose answer was lost looks to
// the writer: an error, although kubeadm-config says the target. With
// unreadable, every read of kubeadm-config after it fails.
func (n *testNode) loseAnswer(unreadable bool) {
	var mu sync.Mutex
	lost, landed := true, false
	n.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		u := a.(k8stesting.UpdateActionImpl)
		mu.Lock()
		defer mu.Unlock()
		if u.GetObject().(*corev1.ConfigMap).Name != "kubeadm-config" || !lost {
			return false, nil, nil
		}
		lost = false
		if err := n.client.Tracker().Update(u.GetResource(), u.GetObject(), u.GetNamespace(), u.UpdateOptions); err != nil {
			return true, nil, err
		}
		landed = true
		return true, nil, apierrors.NewForbidden(u.GetResource().GroupResource(), "kubeadm-config", errors.New("the answer was lost"))
	})
	n.client.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if !unreadable || !landed || a.(k8stesting.GetAction).GetName() != "kubeadm-config" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "kubeadm-config", errors.New("no longer readable"))
	})
}

// A write of kubeadm-config that landed although its answer said it
// failed is past the point of no return: the first node is not put back,
// and its step is recovered forward.
func TestAWriteWhoseAnswerWasLostIsNotPutBack(t *testing.T) {
	n := newTestNode(t)
	n.loseAnswer(false)
	rep, err := Run(context.Background(), n.node, n.request(Apply))
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != UploadConfig || failed.Back || !rep.NoReturn {
		t.Fatalf("got %v (%#v), NoReturn %v; want upload-config failed, the node left for a forward recovery", err, failed, rep.NoReturn)
	}
	if !strings.Contains(n.document(), "kubernetesVersion: "+to) {
		t.Fatalf("the write did not land, the test proves nothing:\n%s", n.document())
	}
	if m := n.read(filepath.Join(n.manifests, "kube-apiserver.yaml")); !strings.Contains(m, ":"+to) {
		t.Errorf("the node was put back although kubeadm-config says %s:\n%s", to, m)
	}
}

// When kubeadm-config cannot be read again after a write that may have
// landed, nothing is put back either, and the error says that the node
// was not put back: it never claims the node back.
func TestAFirstNodeIsNotPutBackWhenKubeadmConfigCannotBeRead(t *testing.T) {
	n := newTestNode(t)
	n.loseAnswer(true)
	rep, err := Run(context.Background(), n.node, n.request(Apply))
	var putBack *PutBackError
	if !errors.As(err, &putBack) || !putBack.Untried || putBack.Failure.Phase != UploadConfig || putBack.Failure.Back || rep.NoReturn {
		t.Fatalf("got %v (%#v), NoReturn %v; want a put-back not tried", err, putBack, rep.NoReturn)
	}
	if !strings.Contains(err.Error(), "not put back: kubeadm-config could not be read") {
		t.Errorf("the error does not say why the node was not put back: %v", err)
	}
	if m := n.read(filepath.Join(n.manifests, "kube-apiserver.yaml")); !strings.Contains(m, ":"+to) {
		t.Errorf("the node was put back although kubeadm-config may say %s:\n%s", to, m)
	}
}

// A first node whose kubeadm-config says the target but whose manifests
// do not (it was put back after a write whose answer was lost) starts
// again at the control-plane phase, not at the phase it stopped in after
// it; once its manifests name the target, where it stopped.
func TestResumePhase(t *testing.T) {
	n := newTestNode(t)
	for _, tc := range []struct {
		kind        Kind
		phase, want string
	}{
		{Apply, "kubelet-config", ControlPlane},
		{Apply, UploadConfig, ControlPlane},
		{Apply, Preflight, Preflight},
		{Apply, Gate, Preflight},
		{Upgrade, "kubelet-config", "kubelet-config"}, // another node's manifests are its own step's
	} {
		if got := ResumePhase(n.node, tc.kind, tc.phase, to); got != tc.want {
			t.Errorf("manifests of %s: ResumePhase(%s, %q) = %q, want %q", from, tc.kind, tc.phase, got, tc.want)
		}
	}
	for _, c := range controlplane.Components() {
		n.write(filepath.Join(n.manifests, c.File()), manifest(c, n.port, to))
	}
	if got := ResumePhase(n.node, Apply, "kubelet-config", to); got != "kubelet-config" {
		t.Errorf("manifests of %s: ResumePhase(apply, kubelet-config) = %q, want kubelet-config", to, got)
	}
}

// withEtcd gives the node a local etcd member running release.
func (n *testNode) withEtcd(release string) {
	n.write(filepath.Join(n.manifests, controlplane.Etcd.File()), manifest(controlplane.Etcd, n.port, release))
}

// upgradedWithBackup leaves the node as kubeadm's control-plane phase of
// this step leaves it: every manifest on the target, and a backup of the
// manifests it ran.
func (n *testNode) upgradedWithBackup() *step {
	dir := filepath.Join(n.tmp, "kubeadm-backup-manifests-2026-12-05-01-41-26")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.t.Fatal(err)
	}
	for _, c := range controlplane.Components() {
		n.write(filepath.Join(dir, c.File()), manifest(c, n.port, from))
		n.write(filepath.Join(n.manifests, c.File()), manifest(c, n.port, to))
	}
	n.write(filepath.Join(dir, controlplane.Etcd.File()), manifest(controlplane.Etcd, n.port, etcdFrom))
	n.withEtcd(etcdTo)
	s := newStep(n.node, n.request(Apply))
	s.changed = true
	return s
}

// members is an etcd cluster whose member 1 is the node's own, each
// member running the etcd release given.
func members(versions ...string) func(context.Context) (*etcd.Cluster, error) {
	return func(context.Context) (*etcd.Cluster, error) {
		cl := &etcd.Cluster{Local: 1}
		for i, v := range versions {
			cl.Members = append(cl.Members, etcd.Member{ID: uint64(i + 1), Name: fmt.Sprintf("cp-%d", i), Status: &etcd.Status{Version: v}})
		}
		return cl, nil
	}
}

// On a cluster of one etcd member, a failed first node is put back but
// for its etcd member: etcd 3.7 may have moved the data beyond what 3.6
// starts on. The outcome says so.
func TestAnEtcdMemberAloneOnTheNewReleaseIsNotPutBack(t *testing.T) {
	n := newTestNode(t)
	s := n.upgradedWithBackup()
	s.etcdCluster = members("3.7.0")
	err := s.recover(context.Background(), &PhaseError{Phase: UploadConfig, Err: errors.New("the dry run failed")})
	var failed *PhaseError
	if !errors.As(err, &failed) || !failed.Back || !strings.Contains(failed.EtcdKept, "stays on etcd 3.7") || !strings.Contains(failed.EtcdKept, "no other member") {
		t.Fatalf("got %v (%#v), want the node back but for etcd, which stays on 3.7", err, failed)
	}
	if m := n.read(filepath.Join(n.manifests, controlplane.Etcd.File())); !strings.Contains(m, ":"+etcdTo) {
		t.Errorf("etcd was put back over data its newer release may have moved:\n%s", m)
	}
	for _, c := range controlplane.Components() {
		if m := n.read(filepath.Join(n.manifests, c.File())); !strings.Contains(m, ":"+from) {
			t.Errorf("%s was not put back:\n%s", c.PodName(), m)
		}
	}
}

// etcd goes back only while another member runs the release it goes
// back to, or when the release does not change.
func TestEtcdStays(t *testing.T) {
	old := []byte(manifest(controlplane.Etcd, "2379", etcdFrom))
	for _, tc := range []struct {
		name    string
		current string
		cluster func(context.Context) (*etcd.Cluster, error)
		stays   string // "" when it goes back
	}{
		{"another member on the old release", etcdTo, members("3.7.0", "3.6.8", "3.7.0"), ""},
		{"alone on the new release", etcdTo, members("3.7.0"), "no other member of its etcd cluster (1 in all) runs 3.6"},
		{"every member on the new release", etcdTo, members("3.7.0", "3.7.0", "3.7.0"), "no other member of its etcd cluster (3 in all) runs 3.6"},
		{"the cluster cannot be asked", etcdTo, func(context.Context) (*etcd.Cluster, error) { return nil, errors.New("connection refused") },
			"its cluster cannot tell whether another member still runs 3.6"},
		{"the same release", "3.6.9-0", members("3.6.9"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t)
			n.withEtcd(tc.current)
			s := newStep(n.node, n.request(Apply))
			s.etcdCluster = tc.cluster
			got := s.etcdStays(context.Background(), old)
			if (tc.stays == "") != (got == "") || !strings.Contains(got, tc.stays) {
				t.Errorf("etcdStays = %q, want %q", got, tc.stays)
			}
		})
	}
}

// The step holds the manifests directory's lock, the one reconfigure and
// the agent's kubeconfig renewal take, while its phases run.
func TestAStepHoldsTheManifestsLock(t *testing.T) {
	n := newTestNode(t)
	req := n.request(Upgrade)
	req.NoReturn = true
	var held []string
	req.Phase = func(p string) error {
		unlock, err := controlplane.Lock(n.manifests)
		if err == nil {
			unlock()
			held = append(held, p+": free")
		}
		return nil
	}
	if _, err := Run(context.Background(), n.node, req); err != nil {
		t.Fatal(err)
	}
	if len(held) > 0 {
		t.Errorf("the manifests directory could be locked while the step ran: %v", held)
	}
	unlock, err := controlplane.Lock(n.manifests)
	if err != nil {
		t.Fatalf("the step left the manifests directory locked: %v", err)
	}
	unlock()
}

// A step that cannot take the lock within Wait changes nothing.
func TestAStepWaitsForTheManifestsLock(t *testing.T) {
	n := newTestNode(t)
	unlock, err := controlplane.Lock(n.manifests)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	req := n.request(Apply)
	req.Wait = 2 * time.Second
	_, err = Run(context.Background(), n.node, req)
	var failed *PhaseError
	if !errors.As(err, &failed) || failed.Phase != Preflight || !failed.Unchanged || !strings.Contains(err.Error(), "another run held the manifests directory") {
		t.Fatalf("got %v (%#v), want preflight failed, nothing changed", err, failed)
	}
	if len(n.calls()) != 0 {
		t.Errorf("kubeadm ran without the lock: %v", n.calls())
	}
}

// Housekeeping orders kubeadm's directories by their time, not by their
// names (kubeadm names kubeadm-upgraded-manifests* at random), and keeps
// the newest KeepBackups of the node's etcd snapshots.
func TestHousekeepingKeepsTheNewestByTime(t *testing.T) {
	n := newTestNode(t)
	n.node.KeepBackups = 2
	now := time.Now()
	for i, name := range []string{"kubeadm-upgraded-manifestsAAA", "kubeadm-upgraded-manifestsMMM", "kubeadm-upgraded-manifestsZZZ"} {
		dir := filepath.Join(n.tmp, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		at := now.Add(-time.Duration(i) * time.Hour) // AAA newest, ZZZ oldest
		if err := os.Chtimes(dir, at, at); err != nil {
			t.Fatal(err)
		}
	}
	db := make([]byte, 4096)
	sum := sha256.Sum256(db)
	snapshot := slices.Concat(db, sum[:])
	byRev := map[int64]string{}
	for _, w := range []struct {
		node string
		rev  int64
	}{{"cp-0", 30}, {"cp-0", 10}, {"cp-0", 20}, {"cp-1", 5}} {
		snap, err := n.node.Store.WriteEtcdSnapshot(bytes.NewReader(snapshot), backup.EtcdSnapshotMeta{Node: w.node, Member: w.node,
			MemberID: "00000000000000aa", ClusterID: "cdf818194e3a8c32", Revision: w.rev, EtcdVersion: "3.6.8", Reason: backup.ReasonBeforeEtcdChange}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		byRev[w.rev] = snap.Name
	}
	req := n.request(Upgrade)
	req.NoReturn = true
	if _, err := Run(context.Background(), n.node, req); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(n.tmp, "kubeadm-upgraded-manifests*"))
	if diff := cmp.Diff([]string{filepath.Join(n.tmp, "kubeadm-upgraded-manifestsAAA"), filepath.Join(n.tmp, "kubeadm-upgraded-manifestsMMM")}, left); diff != "" {
		t.Errorf("kubeadm-upgraded-manifests* left (-want +got):\n%s", diff)
	}
	snaps, err := n.node.Store.EtcdSnapshots()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(snaps)
	want := []string{byRev[5], byRev[20], byRev[30]}
	slices.Sort(want)
	if diff := cmp.Diff(want, snaps); diff != "" {
		t.Errorf("etcd snapshots left (-want +got):\n%s", diff)
	}
}

// The first node's write of kubeadm-config goes through Env.ConfigWriter,
// the upgrade's own engine, never the node's engine for other writes.
func TestTheUpgradeWritesWithItsOwnEngine(t *testing.T) {
	n := newTestNode(t)
	store := &backup.Store{Dir: t.TempDir()}
	n.node.ConfigWriter = engine.New(n.client, engine.Target{Namespace: "kube-system", Name: "kubeadm-config", Key: engine.DefaultKey},
		engine.Options{Validation: engine.ValidationStrict, Backup: &backup.Hook{Store: store, Keep: 10, Reason: backup.ReasonBeforeUpgrade}})
	if _, err := Run(context.Background(), n.node, n.request(Apply)); err != nil {
		t.Fatal(err)
	}
	names, err := store.List()
	if err != nil || len(names) != 1 {
		t.Fatalf("backups %v (%v), want the one the upgrade's write took", names, err)
	}
	b, err := store.Read(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if b.Reason != backup.ReasonBeforeUpgrade || !strings.Contains(string(b.Document), "kubernetesVersion: "+from) {
		t.Errorf("the backup says %q of:\n%s", b.Reason, b.Document)
	}
}
