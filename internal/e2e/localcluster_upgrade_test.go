package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/testcluster"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
)

// hack/localcluster run --kubernetes-version v1.36.3: three stacked-etcd
// nodes of the previous release, upgraded to the current one by the real
// kubeadm, driven by hand as an agent on each node would drive it, phase
// by phase, with nothing but what run gives its command: each node's
// kubeadm template (LOCALCLUSTER_<I>_KUBEADM_TEMPLATE, {version} replaced),
// its directories, its kubelet restart command and its fault files. On
// cp-0 `kubeadm upgrade apply phase ...`, on cp-1 and cp-2 `kubeadm upgrade
// node phase ...`, then each node's kubelet restart; kubeadm's own
// preflight runs, with only the checks named in upgradeIgnored ignored.
// The test runs again inside the run's namespaces (upgradeInside).

// upgradeIgnored are the preflight checks the upgrade ignores, and why:
// SystemVerification validates the host's kernel configuration and
// cgroups, which a node's root has no /proc, /sys or /boot to show (it
// fails on `kubelet --version` first: the node's kubelet is the harness's
// stand-in, not a program in the root). Every other check runs and passes.
var upgradeIgnored = []string{"SystemVerification"}

func TestLocalClusterUpgradeByHand(t *testing.T) {
	if testcluster.InTestNetns() {
		upgradeInside(t)
		return
	}
	runInPreviousRelease(t, 14*time.Minute)
}

// runInPreviousRelease starts `localcluster run` with three stacked-etcd
// nodes of the previous release and runs the test again inside it, for up
// to timeout; the test's steps run there (newUpgradeCluster).
func runInPreviousRelease(t *testing.T, timeout time.Duration) {
	t.Helper()
	inOwnCluster(t) // a process and namespaces of its own, as inOwnNetns
	tool := filepath.Join(s.binDir, "localcluster")
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := keptDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "run", "--nodes", "3", "--etcd", "stacked", "--kubernetes-version", bins.Previous.Version,
		"--dir", filepath.Join(dir, "cluster"), "--",
		"env", testcluster.NetnsEnv+"=1", self, "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout", timeout.String())
	p := startProcess(t, cmd)
	r := p.wait(t, timeout+2*time.Minute)
	for _, line := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
		t.Log("inside: " + line)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "--- PASS: "+t.Name()) {
		t.Fatalf("the test inside the run failed: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if left := processesNaming(t, dir); left != "" {
		t.Errorf("processes outlived run:\n%s", left)
	}
}

// upgradeNode is one node of the run, from its variables.
type upgradeNode struct {
	index                                         int
	name, dir, patches, template, restart, faults string
	healthz                                       string
}

// upgradeCluster is the run's cluster as the test sees it from inside.
type upgradeCluster struct {
	nodes  []upgradeNode
	bins   testcluster.Binaries
	from   testcluster.Release
	to     testcluster.Release
	client kubernetes.Interface
}

func upgradeInside(t *testing.T) {
	c := newUpgradeCluster(t)
	runSteps(t, c, []step[*upgradeCluster]{
		{"every node runs the previous release, its kubelet reports it, Ready, and serves /healthz where its config.yaml says", func(t *testing.T, c *upgradeCluster) {
			for _, n := range c.nodes {
				if want := fmt.Sprintf("http://127.0.0.1:%d/healthz", 10248+10*n.index); n.healthz != want {
					t.Errorf("%s: LOCALCLUSTER_%d_KUBELET_HEALTHZ=%q, want %s", n.name, n.index, n.healthz, want)
				}
				if want := filepath.Join(n.dir, "usr", "local", "kubernetes", "{version}", "bin", "kubeadm"); n.template != want {
					t.Errorf("%s: LOCALCLUSTER_%d_KUBEADM_TEMPLATE=%q, want %s", n.name, n.index, n.template, want)
				}
			}
			c.wantRelease(t, c.from)
			c.wantKubelets(t, c.from.Version)
			c.wantKubeadmConfig(t, c.from.Version)
		}},
		{"cp-0: kubeadm upgrade apply, phase by phase", func(t *testing.T, c *upgradeCluster) {
			n := c.nodes[0]
			for _, phase := range applyPhases {
				switch phase {
				case "upload-config all":
					c.markKubeletConfigMap(t)
				case "kubelet-config":
					c.markKubeletConfig(t, n)
				}
				out := c.kubeadm(t, n, c.phaseArgs(t, n, "apply", phase)...)
				switch phase {
				case "preflight":
					c.wantPreflight(t, n, out)
				case "control-plane":
					c.wantNodeRelease(t, n, c.to)
					c.wantBackups(t, n, "kubeadm-backup-manifests-", "kubeadm-backup-etcd-")
					// kubeadm copied etcd's data with `cp -r` (the root's cp).
					if db, _ := filepath.Glob(filepath.Join(n.dir, "etc", "kubernetes", "tmp", "kubeadm-backup-etcd-*", "etcd", "member", "snap", "db")); len(db) != 1 {
						t.Errorf("%s: the etcd backup holds %d databases, want 1", n.name, len(db))
					}
				case "upload-config all":
					c.wantKubeadmConfig(t, c.to.Version)
					c.wantKubeletConfigMapWritten(t)
				case "kubelet-config":
					c.wantKubeletConfigWritten(t, n)
				}
			}
		}},
		{"cp-1: kubeadm upgrade node, its kubelet-config phase failing once after it wrote config.yaml", func(t *testing.T, c *upgradeCluster) {
			n := c.nodes[1]
			fault := filepath.Join(n.faults, testcluster.FaultKubeletConfig)
			for _, phase := range nodePhases {
				if phase == "kubelet-config" {
					c.markKubeletConfig(t, n)
					if err := os.WriteFile(fault, []byte("disk full (injected)\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					r := c.kubeadmResult(t, n, c.phaseArgs(t, n, "node", phase)...)
					if r.code == 0 || !strings.Contains(r.stderr, "disk full (injected)") {
						t.Fatalf("with %s, want the phase to fail with the file's content, got %s", fault, r)
					}
					// It failed after kubeadm wrote the new config.yaml.
					c.wantKubeletConfigWritten(t, n)
					// The cause fixed, the same phase runs again. kubeadm names
					// its backup of config.yaml by the second: a re-run within
					// the same second fails to create it.
					if err := os.Remove(fault); err != nil {
						t.Fatal(err)
					}
					waitNextSecond()
					c.markKubeletConfig(t, n)
				}
				out := c.kubeadm(t, n, c.phaseArgs(t, n, "node", phase)...)
				switch phase {
				case "preflight":
					c.wantPreflight(t, n, out)
				case "control-plane":
					c.wantNodeRelease(t, n, c.to)
				case "kubelet-config":
					c.wantKubeletConfigWritten(t, n)
				}
			}
		}},
		{"cp-2: kubeadm upgrade node; the last control plane upgrades the addons", func(t *testing.T, c *upgradeCluster) {
			n := c.nodes[2]
			for _, phase := range nodePhases {
				if phase == "kubelet-config" {
					c.markKubeletConfig(t, n)
				}
				out := c.kubeadm(t, n, c.phaseArgs(t, n, "node", phase)...)
				switch phase {
				case "preflight":
					c.wantPreflight(t, n, out)
				case "kubelet-config":
					c.wantKubeletConfigWritten(t, n)
				case "addon all":
					for _, addon := range []string{"CoreDNS", "kube-proxy"} {
						if !strings.Contains(out, "[addons] Applied essential addon: "+addon) {
							t.Errorf("the last control plane's addon phase did not apply %s:\n%s", addon, out)
						}
					}
				}
			}
			c.wantRelease(t, c.to)
		}},
		{"kubelets: a restart that fails, then each node's restart to the new release", func(t *testing.T, c *upgradeCluster) {
			n := c.nodes[1]
			fault := filepath.Join(n.faults, testcluster.FaultKubeletRestart)
			if err := os.WriteFile(fault, []byte("apt: unable to lock the administration directory (injected)\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := c.restartKubelet(t, n, c.to.Version)
			if r.code == 0 || !strings.Contains(r.stderr, "unable to lock the administration directory (injected)") {
				t.Fatalf("with %s, want the restart to fail with the file's content, got %s", fault, r)
			}
			if got := c.kubeletVersion(t, n); got != c.from.Version {
				t.Errorf("%s reports kubelet %s after a failed restart, want %s", n.name, got, c.from.Version)
			}
			if err := os.Remove(fault); err != nil {
				t.Fatal(err)
			}
			for _, n := range c.nodes {
				start := time.Now()
				if r := c.restartKubelet(t, n, c.to.Version); r.code != 0 {
					t.Fatalf("%s: kubelet restart: %s", n.name, r)
				}
				t.Logf("%s: kubelet restart took %s", n.name, time.Since(start).Round(100*time.Millisecond))
			}
			c.wantKubelets(t, c.to.Version)
		}},
		{"every node runs the new release, kubeadm-config says so, and each kubelet reports it, Ready", func(t *testing.T, c *upgradeCluster) {
			c.wantRelease(t, c.to)
			c.wantKubeadmConfig(t, c.to.Version)
			c.wantKubelets(t, c.to.Version)
		}},
	})
}

// newUpgradeCluster is the run's cluster, from the variables run gives
// the test inside it, at the previous release.
func newUpgradeCluster(t *testing.T) *upgradeCluster {
	t.Helper()
	bins, err := testcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	c := &upgradeCluster{bins: bins, from: bins.Previous, to: bins.Current()}
	if got := os.Getenv("LOCALCLUSTER_KUBERNETES_VERSION"); got != c.from.Version {
		t.Fatalf("LOCALCLUSTER_KUBERNETES_VERSION=%q, want %s", got, c.from.Version)
	}
	for i, name := range strings.Fields(os.Getenv("LOCALCLUSTER_NODES")) {
		v := func(k string) string { return os.Getenv(fmt.Sprintf("LOCALCLUSTER_%d_%s", i, k)) }
		c.nodes = append(c.nodes, upgradeNode{index: i, name: name, dir: v("DIR"), patches: v("PATCHES"),
			template: v("KUBEADM_TEMPLATE"), restart: v("KUBELET_RESTART"), faults: v("FAULTS"), healthz: v("KUBELET_HEALTHZ")})
	}
	if len(c.nodes) != 3 {
		t.Fatalf("want 3 nodes, got LOCALCLUSTER_NODES=%q", os.Getenv("LOCALCLUSTER_NODES"))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	c.client = kubernetes.NewForConfigOrDie(cfg)
	return c
}

// The phases of `kubeadm upgrade apply` and `kubeadm upgrade node`, in
// kubeadm 1.37's order, as an agent runs them (pkg/kubeadmupgrade), but
// for upload-config: by hand, kubeadm writes kubeadm-config itself
// ("upload-config all"); an agent has the engine write it.
var (
	applyPhases = kubeadmPhases(kubeadmupgrade.Apply)
	nodePhases  = kubeadmPhases(kubeadmupgrade.Upgrade)
)

func kubeadmPhases(kind kubeadmupgrade.Kind) []string {
	var phases []string
	for _, p := range kubeadmupgrade.Phases(kind) {
		switch p {
		case kubeadmupgrade.Gate:
			continue
		case kubeadmupgrade.UploadConfig:
			p = "upload-config all"
		}
		phases = append(phases, p)
	}
	return phases
}

// phaseArgs are kubeadm's arguments for one phase on the node, as an agent
// passes them (kubeadmupgrade.Args), with the node's patches directory as
// the path inside its root, where the node's kubeadm reads it.
func (c *upgradeCluster) phaseArgs(t *testing.T, n upgradeNode, command, phase string) []string {
	t.Helper()
	return kubeadmupgrade.Args(kubeadmupgrade.Kind(command), phase, c.writeUpgradeConfig(t, n), n.patches)
}

// writeUpgradeConfig writes the UpgradeConfiguration an agent writes
// (kubeadmupgrade.Config) in the node's /etc/kubernetes/tmp, and returns
// its path on the host, which the node's kubeadm passes as the path inside
// the root. timeouts.upgradeManifests is low, so that a component that
// does not come back is rolled back in a minute.
func (c *upgradeCluster) writeUpgradeConfig(t *testing.T, n upgradeNode) string {
	t.Helper()
	dir := kubeadmupgrade.TmpDir(filepath.Join(n.dir, "etc", "kubernetes", "manifests"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, kubeadmupgrade.ConfigFile)
	if err := os.WriteFile(path, kubeadmupgrade.Config(c.to.Version, upgradeIgnored, time.Minute), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeadmResult runs the node's kubeadm of the target release, as an agent
// would: the template with {version} replaced.
func (c *upgradeCluster) kubeadmResult(t *testing.T, n upgradeNode, args ...string) result {
	t.Helper()
	bin := strings.ReplaceAll(n.template, "{version}", c.to.Version)
	start := time.Now()
	r := runLong(t, 8*time.Minute, bin, args...)
	command := args[:slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--") })]
	t.Logf("%s: kubeadm %s: exit %d in %s", n.name, strings.Join(command, " "), r.code, time.Since(start).Round(100*time.Millisecond))
	return r
}

// kubeadm runs it and fails the test unless it succeeds; it returns what
// kubeadm printed.
func (c *upgradeCluster) kubeadm(t *testing.T, n upgradeNode, args ...string) string {
	t.Helper()
	r := c.kubeadmResult(t, n, args...)
	if r.code != 0 {
		t.Fatalf("%s: kubeadm %s: %s", n.name, strings.Join(args, " "), r)
	}
	return r.stdout + r.stderr
}

// wantPreflight checks that kubeadm's preflight ran its checks, ignored
// only upgradeIgnored, and pulled the new release's images through the
// node's container runtime.
func (c *upgradeCluster) wantPreflight(t *testing.T, n upgradeNode, out string) {
	t.Helper()
	var warned []string
	for _, m := range regexp.MustCompile(`\[WARNING ([A-Za-z]+)\]`).FindAllStringSubmatch(out, -1) {
		if !slices.Contains(warned, m[1]) {
			warned = append(warned, m[1])
		}
	}
	for _, w := range warned {
		if !slices.Contains(upgradeIgnored, w) {
			t.Errorf("%s: preflight check %s warned, which the upgrade does not ignore:\n%s", n.name, w, out)
		}
	}
	pulls := readString(t, filepath.Join(n.dir, "logs", "cri.log"))
	for _, image := range []string{"kube-apiserver:" + c.to.Version, "kube-controller-manager:" + c.to.Version, "kube-scheduler:" + c.to.Version} {
		if !strings.Contains(pulls, "PullImage registry.k8s.io/"+image) {
			t.Errorf("%s: kubeadm did not pull %s through the node's container runtime:\n%s", n.name, image, pulls)
		}
	}
}

// wantNodeRelease checks one node: each component a process of the
// release's binary, each mirror Pod its image.
func (c *upgradeCluster) wantNodeRelease(t *testing.T, n upgradeNode, r testcluster.Release) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := map[string]string{"kube-apiserver": r.APIServer, "kube-controller-manager": r.ControllerManager,
		"kube-scheduler": r.Scheduler, "etcd": r.Etcd}
	// /proc/PID/exe names the binary with its links resolved.
	for component, bin := range want {
		resolved, err := filepath.EvalSymlinks(bin)
		if err != nil {
			t.Fatal(err)
		}
		want[component] = resolved
	}
	waitFor(t, ctx, n.name+" runs "+r.Version, func() error {
		var errs []error
		procs := processArgs(t)
		for component, bin := range want {
			var exes []string
			for pid, argv := range procs {
				if filepath.Base(argv[0]) != component || !slices.ContainsFunc(argv[1:], func(a string) bool { return strings.Contains(a, n.dir+"/") }) {
					continue
				}
				exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
				if err == nil {
					exes = append(exes, exe)
				}
			}
			if len(exes) != 1 || exes[0] != bin {
				errs = append(errs, fmt.Errorf("%s runs %q, want one process of %s", component, exes, bin))
			}
			pod, err := c.client.CoreV1().Pods("kube-system").Get(ctx, component+"-"+n.name, metav1.GetOptions{})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			image := pod.Spec.Containers[0].Image
			if !strings.HasSuffix(image, "/"+c.imageKey(r, component)) || !podReady(pod) {
				errs = append(errs, fmt.Errorf("mirror Pod %s: image %s, Ready %v, want %s Ready", pod.Name, image, podReady(pod), c.imageKey(r, component)))
			}
		}
		return errors.Join(errs...)
	})
}

// imageKey is a component's image of a release, without its registry.
func (c *upgradeCluster) imageKey(r testcluster.Release, component string) string {
	if component == "etcd" {
		return "etcd:" + strings.TrimPrefix(r.EtcdVersion, "v") + "-0"
	}
	return component + ":" + r.Version
}

// wantRelease checks every node.
func (c *upgradeCluster) wantRelease(t *testing.T, r testcluster.Release) {
	t.Helper()
	for _, n := range c.nodes {
		c.wantNodeRelease(t, n, r)
	}
}

// wantKubeadmConfig checks the ClusterConfiguration's kubernetesVersion.
func (c *upgradeCluster) wantKubeadmConfig(t *testing.T, version string) {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		KubernetesVersion string `json:"kubernetesVersion"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.KubernetesVersion != version {
		t.Errorf("kubeadm-config says kubernetesVersion %q, want %s", cfg.KubernetesVersion, version)
	}
}

// kubeletConfigMark is a comment the test appends to a kubelet
// configuration kubeadm is about to write: gone afterwards, it shows that
// kubeadm wrote it (the previous release's and this one's are otherwise
// the same).
const kubeletConfigMark = "# kubeadmcfg-e2e: written before the upgrade\n"

// markKubeletConfig marks the node's /var/lib/kubelet/config.yaml.
func (c *upgradeCluster) markKubeletConfig(t *testing.T, n upgradeNode) {
	t.Helper()
	path := filepath.Join(n.dir, "var", "lib", "kubelet", "config.yaml")
	if err := os.WriteFile(path, []byte(readString(t, path)+kubeletConfigMark), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantKubeletConfigWritten checks that kubeadm rewrote the node's marked
// config.yaml, with the node's patch (its healthz port), and backed the
// marked one up.
func (c *upgradeCluster) wantKubeletConfigWritten(t *testing.T, n upgradeNode) {
	t.Helper()
	data := readString(t, filepath.Join(n.dir, "var", "lib", "kubelet", "config.yaml"))
	if strings.Contains(data, kubeletConfigMark) {
		t.Errorf("%s: kubeadm did not write /var/lib/kubelet/config.yaml", n.name)
	}
	if want := fmt.Sprintf("healthzPort: %d\n", 10248+10*n.index); !strings.Contains(data, want) {
		t.Errorf("%s: config.yaml lost the node's patch %q:\n%s", n.name, want, data)
	}
	backups, err := filepath.Glob(filepath.Join(n.dir, "etc", "kubernetes", "tmp", "kubeadm-kubelet-config-*", "config.yaml"))
	if err != nil || len(backups) == 0 {
		t.Fatalf("%s: no backup of config.yaml in /etc/kubernetes/tmp: %v", n.name, err)
	}
	slices.Sort(backups)
	if !strings.Contains(readString(t, backups[len(backups)-1]), kubeletConfigMark) {
		t.Errorf("%s: the newest backup %s is not the config.yaml kubeadm replaced", n.name, backups[len(backups)-1])
	}
}

// markKubeletConfigMap marks the kubelet-config ConfigMap's configuration.
func (c *upgradeCluster) markKubeletConfigMap(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubelet-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["kubelet"] += kubeletConfigMark
	if _, err := c.client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// wantKubeletConfigMapWritten checks that kubeadm rewrote the marked
// kubelet-config ConfigMap.
func (c *upgradeCluster) wantKubeletConfigMapWritten(t *testing.T) {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubelet-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if data := cm.Data["kubelet"]; strings.Contains(data, kubeletConfigMark) || !strings.Contains(data, "kind: KubeletConfiguration") {
		t.Errorf("kubeadm did not write the kubelet-config ConfigMap:\n%s", data)
	}
}

// wantBackups checks that the node's /etc/kubernetes/tmp holds a directory
// of each prefix.
func (c *upgradeCluster) wantBackups(t *testing.T, n upgradeNode, prefixes ...string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.dir, "etc", "kubernetes", "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prefixes {
		if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.IsDir() && strings.HasPrefix(e.Name(), p) }) {
			t.Errorf("%s: no %s* in /etc/kubernetes/tmp", n.name, p)
		}
	}
}

// restartKubelet runs the node's kubelet restart command as an agent would.
func (c *upgradeCluster) restartKubelet(t *testing.T, n upgradeNode, version string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.restart)
	cmd.Env = append(os.Environ(), "KUBEADMCFG_KUBELET_VERSION="+version)
	return runCmd(t, cmd)
}

func (c *upgradeCluster) kubeletVersion(t *testing.T, n upgradeNode) string {
	t.Helper()
	node, err := c.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node.Status.NodeInfo.KubeletVersion
}

// wantKubelets checks that every Node reports kubelet version and is Ready,
// and that every kubelet answers /healthz.
func (c *upgradeCluster) wantKubelets(t *testing.T, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range c.nodes {
		waitFor(t, ctx, n.name+"'s kubelet "+version, func() error {
			node, err := c.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := node.Status.NodeInfo.KubeletVersion; got != version {
				return fmt.Errorf("it reports kubelet %q", got)
			}
			ready := false
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					ready = cond.Status == corev1.ConditionTrue
				}
			}
			if !ready {
				return errors.New("it is not Ready")
			}
			resp, err := http.Get(n.healthz) //nolint:noctx // bounded by the client's default transport and the wait
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", n.healthz, resp.Status)
			}
			return nil
		})
	}
}

// waitNextSecond waits until the wall clock's second changes.
func waitNextSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now) + 10*time.Millisecond)
}
