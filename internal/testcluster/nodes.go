package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// StartNodes runs a kubeadm control plane of one or more nodes the way a
// kubeadm cluster runs: each node's kube-apiserver, kube-controller-manager
// and kube-scheduler are kubeadm's own static Pod manifests, run by a
// static Pod runner, with certificates and kubeconfigs from `kubeadm init
// phase certs` and `kubeconfig`; etcd is external (the harness's) or
// stacked (a member on every node from kubeadm's etcd manifest, see
// etcd.go); a TCP load balancer on the controlPlaneEndpoint forwards to the
// API servers.
//
// Each node's directory is its root, its "/": besides /etc/kubernetes and
// what its components write, it holds what kubeadm upgrade reads and runs
// on a node (noderoot.go), so that the real `kubeadm --rootfs ROOT upgrade`
// upgrades it; the runner also stands in for the node's kubelet towards
// the API (Node status, Lease, version, /healthz; kubelet.go). The control
// plane starts at one of the releases the harness built
// (NodesOptions.KubernetesVersion), set up by that release's kubeadm, and
// the runner runs each manifest's component with the binary of its image.
//
// It needs the node addresses on a local interface, which kubeadm insists
// on (it refuses loopback advertise addresses): run it inside a network
// namespace of the test's own (see ReexecInNetns), never on a shared host;
// there the test is root of its user namespace, which lets kubeadm chroot.
// Nothing is written outside Dir.

// NodeSpec describes one control-plane node.
type NodeSpec struct {
	Name string
	// Address is the node's advertise address; BindPort its API server's
	// port. Nodes share one network namespace, so their ports differ.
	Address  string
	BindPort int32
	// AgentMetricsAddress is where an agent of the node serves its metrics
	// (its --metrics-bind-address): the agent's default may be a port of
	// another node's component when the nodes share a loopback. The harness
	// runs no agent; "" leaves the agent's default.
	AgentMetricsAddress string
	// Patches are kubeadm patch files (name -> content) the node's manifests
	// are rendered with.
	Patches map[string]string
}

// NodesOptions configure StartNodes.
type NodesOptions struct {
	// Dir holds everything; empty means a temporary directory Stop removes.
	Dir string
	// Endpoint is the controlPlaneEndpoint (host:port) the load balancer
	// listens on.
	Endpoint string
	// Etcd is where etcd runs: EtcdExternal (the default) or EtcdStacked.
	Etcd EtcdMode
	// KubernetesVersion is the control plane's version: Binaries.Version
	// (the default) or Binaries.Previous.Version. The nodes are set up by
	// that release's kubeadm and run its components; ClusterConfig, when
	// given, must name it (or name the version, when this is empty).
	KubernetesVersion string
	// EtcdURL is where the harness's external etcd serves
	// (http://127.0.0.1:2379 when empty); unused with a stacked etcd.
	EtcdURL string
	// ClusterConfig is the ClusterConfiguration (NodesClusterConfig, or
	// StackedClusterConfig for a stacked etcd, when empty). Its
	// certificatesDir stays kubeadm's default: the runner maps
	// /etc/kubernetes into each node's root.
	ClusterConfig string
	Nodes         []NodeSpec
	// Grace is the runners' RunnerOptions.Grace.
	Grace time.Duration
	Log   func(format string, args ...any)
}

// Node is one control-plane node.
type Node struct {
	NodeSpec
	// Root is the node's /: its /etc/kubernetes is Root/etc/kubernetes.
	Root         string
	ManifestsDir string
	// PatchesDir holds the node's kubeadm patches ("" without any).
	PatchesDir string
	// Runner runs the node's static Pods.
	Runner *Runner
	// Etcd is the node's member of a stacked etcd (nil with external etcd).
	Etcd *EtcdMember
	// KubeadmTemplate, KubeletRestart, FaultsDir and KubeletHealthz are how
	// kubeadm and a kubelet's upgrade reach the node (noderoot.go).
	KubeadmTemplate, KubeletRestart, FaultsDir, KubeletHealthz string
	// TmpDir is the node's /tmp, an agent's TMPDIR on the node: a kubeadm
	// of KubeadmTemplate runs in the node's root, so the files an agent
	// hands it must be under the root. KubeletConfig is the node's
	// /var/lib/kubelet/config.yaml, the agent's --kubelet-config.
	TmpDir, KubeletConfig string

	cri *nodeProcess // the node's container runtime, nodebox cri
}

// InitConfiguration is the node's own kubeadm document.
func (n *Node) InitConfiguration() string {
	return n.initConfiguration(n.PatchesDir)
}

func (n *Node) initConfiguration(patches string) string {
	s := fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: %s
  bindPort: %d
nodeRegistration:
  name: %s
`, n.Address, n.BindPort, n.Name)
	if patches != "" {
		s += "patches:\n  directory: " + patches + "\n"
	}
	return s
}

// ConfigFile is the kubeadm config file for clusterConfig on this node.
func (n *Node) ConfigFile(clusterConfig string) string {
	return strings.TrimRight(clusterConfig, "\n") + "\n---\n" + n.InitConfiguration()
}

// rootConfigFile is ConfigFile for a kubeadm that runs in the node's root
// (--rootfs), which finds the patches at their path inside the root.
func (n *Node) rootConfigFile(clusterConfig string) string {
	patches := ""
	if n.PatchesDir != "" {
		patches = "/" + strings.TrimPrefix(n.PatchesDir, n.Root+"/")
	}
	return strings.TrimRight(clusterConfig, "\n") + "\n---\n" + n.initConfiguration(patches)
}

// Nodes is a running control plane of static-Pod nodes.
type Nodes struct {
	Dir string
	// Kubeconfig is a system:masters kubeconfig through the load balancer.
	Kubeconfig    string
	ClusterConfig string
	// Etcd is where etcd runs.
	Etcd  EtcdMode
	Nodes []*Node
	Bins  Binaries
	// Release is the control plane's release as it started: its kubeadm set
	// the nodes up.
	Release Release
	// Images are the images of both releases kubeadm lists, with the
	// binaries that run them (RunnerOptions.Binaries), and per release the
	// images its kubeadm lists (what a node of that version has pulled).
	Images        map[string]string
	releaseImages map[string][]string

	base *Cluster // runs the external etcd, in Dir
	lb   *loadBalancer
}

// StartNodes starts the external etcd, the load balancer and every node
// in turn (with a stacked etcd, each node's member joins the cluster as
// `kubeadm join --control-plane` adds it), uploads the ClusterConfiguration
// with `kubeadm init phase upload-config kubeadm`, and returns once every
// component's mirror Pod is Ready.
func StartNodes(ctx context.Context, bins Binaries, opts NodesOptions) (*Nodes, error) {
	if bins.ControllerManager == "" || bins.Scheduler == "" {
		return nil, errors.New("kube-controller-manager and kube-scheduler are not built (make testbin)")
	}
	release, err := opts.complete(bins)
	if err != nil {
		return nil, err
	}
	base := &Cluster{Bins: bins, opts: Options{Log: opts.Log}, Dir: opts.Dir, EtcdURL: opts.EtcdURL}
	if base.Dir == "" {
		dir, err := os.MkdirTemp("", "kubeadmcfg-nodes-")
		if err != nil {
			return nil, err
		}
		base.Dir, base.ownDir = dir, true
	}
	n := &Nodes{Dir: base.Dir, ClusterConfig: opts.ClusterConfig, Etcd: opts.Etcd, Bins: bins, Release: release, base: base}
	if err := n.start(ctx, opts); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// startEtcd runs the harness's etcd, the nodes' external etcd.
func (n *Nodes) startEtcd(ctx context.Context) error {
	u, err := url.Parse(n.base.EtcdURL)
	if err != nil {
		return err
	}
	peer := fmt.Sprintf("http://%s:2380", u.Hostname())
	n.base.logf("starting etcd on %s", n.base.EtcdURL)
	if err := n.base.run("etcd", n.Bins.Etcd, []string{
		"--name=default", "--data-dir=" + filepath.Join(n.Dir, "etcd"),
		"--listen-client-urls=" + n.base.EtcdURL, "--advertise-client-urls=" + n.base.EtcdURL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=default=" + peer,
		"--log-level=warn", "--unsafe-no-fsync",
	}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		resp, err := http.Get(n.base.EtcdURL + "/health") //nolint:noctx // bounded by the loop's deadline
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd is not healthy: %s", lastLines(filepath.Join(n.Dir, "etcd.log"), 3))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// start sets the nodes up one after the other, as kubeadm init and then
// kubeadm join on each further node would: a node's runner (its kubelet)
// runs before its etcd member joins, and a member joins only once the
// cluster before it is healthy.
func (n *Nodes) start(ctx context.Context, opts NodesOptions) error {
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return err
	}
	if n.Etcd == EtcdExternal {
		if err := n.startEtcd(ctx); err != nil {
			return err
		}
	}
	var backends []string
	for _, spec := range opts.Nodes {
		backends = append(backends, net.JoinHostPort(spec.Address, fmt.Sprint(spec.BindPort)))
	}
	lb, err := startLoadBalancer(opts.Endpoint, backends)
	if err != nil {
		return err
	}
	n.lb = lb
	if err := n.listImages(ctx); err != nil {
		return err
	}
	var client kubernetes.Interface
	for i, spec := range opts.Nodes {
		node, err := n.setUpNode(ctx, spec, opts)
		if err != nil {
			return fmt.Errorf("node %s: %w", spec.Name, err)
		}
		n.Nodes = append(n.Nodes, node)
		if i == 0 {
			n.Kubeconfig = filepath.Join(node.Root, "etc", "kubernetes", "super-admin.conf")
			if client, err = n.Clientset(); err != nil {
				return err
			}
		}
		opts.Log("starting the static Pod runner (the kubelet) and the container runtime of %s", node.Name)
		if err := n.startCRI(node); err != nil {
			return fmt.Errorf("node %s: %w", spec.Name, err)
		}
		node.Runner = StartRunner(RunnerOptions{Node: node.Name, Address: node.Address, Root: node.Root, ManifestsDir: node.ManifestsDir,
			Binaries: n.Images, Client: client, Grace: opts.Grace, KubeletVersion: n.Release.Version, Log: opts.Log})
		if n.Etcd == EtcdStacked && i > 0 {
			opts.Log("%s: joining its etcd member as kubeadm join --control-plane does", node.Name)
			if err := n.joinEtcd(ctx, node, filepath.Join(node.Root, "kubeadm.yaml"), opts.Log); err != nil {
				return fmt.Errorf("node %s: %w", spec.Name, err)
			}
		}
	}
	if err := n.waitAPI(ctx); err != nil {
		return err
	}
	// The kubelet's configuration too, as kubeadm init uploads it: the
	// kubelet-config ConfigMap (and the RBAC that lets nodes read it),
	// which kubeadm upgrade writes each node's config.yaml from. kubeadm
	// runs in the first node's root with its admin.conf, as `kubeadm init`
	// does: it then also binds admin.conf's group, kubeadm:cluster-admins,
	// to cluster-admin, which kubeadm upgrade's admin.conf needs.
	opts.Log("uploading the ClusterConfiguration and the kubelet's with kubeadm init phase upload-config all, in %s's root", n.Nodes[0].Name)
	first := n.Nodes[0]
	file := filepath.Join(first.Root, "upload-config.yaml")
	if err := os.WriteFile(file, []byte(first.rootConfigFile(n.ClusterConfig)), 0o600); err != nil {
		return err
	}
	kubeadm := strings.ReplaceAll(first.KubeadmTemplate, "{version}", n.Release.Version)
	if out, err := exec.CommandContext(ctx, kubeadm, "init", "phase", "upload-config", "all", "--config", file).CombinedOutput(); err != nil {
		return fmt.Errorf("kubeadm init phase upload-config all: %w: %s", err, out)
	}
	// And CoreDNS and kube-proxy, as kubeadm init installs them, whose
	// upgrade kubeadm upgrade checks and makes. Their Pods stay Pending:
	// the harness runs no container of theirs.
	opts.Log("installing CoreDNS and kube-proxy with kubeadm init phase addon all, in %s's root", first.Name)
	if out, err := exec.CommandContext(ctx, kubeadm, "init", "phase", "addon", "all", "--config", file).CombinedOutput(); err != nil {
		return fmt.Errorf("kubeadm init phase addon all: %w: %s", err, out)
	}
	return n.WaitReady(ctx, 3*time.Minute)
}

// sharedPKI are the files every control-plane node has the same copy of;
// with a stacked etcd, the etcd CA too (sharedEtcdPKI). These are the
// files `kubeadm join --control-plane` copies.
var (
	sharedPKI     = []string{"ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key", "sa.pub"}
	sharedEtcdPKI = []string{"etcd/ca.crt", "etcd/ca.key"}
)

// setUpNode writes a node's certificates, kubeconfigs, patches and initial
// manifests, all with kubeadm.
func (n *Nodes) setUpNode(ctx context.Context, spec NodeSpec, opts NodesOptions) (*Node, error) {
	root := filepath.Join(n.Dir, spec.Name)
	etc := filepath.Join(root, "etc", "kubernetes")
	pki := filepath.Join(etc, "pki")
	node := &Node{NodeSpec: spec, Root: root, ManifestsDir: filepath.Join(etc, "manifests")}
	dirs := []string{pki, node.ManifestsDir}
	if n.Etcd == EtcdStacked {
		dirs = append(dirs, filepath.Join(pki, "etcd"))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	// Every node shares the first one's CAs and service-account key, as
	// kubeadm join --control-plane copies them.
	if len(n.Nodes) > 0 {
		from := filepath.Join(n.Nodes[0].Root, "etc", "kubernetes", "pki")
		shared := sharedPKI
		if n.Etcd == EtcdStacked {
			shared = append(append([]string{}, sharedPKI...), sharedEtcdPKI...)
		}
		for _, f := range shared {
			data, err := os.ReadFile(filepath.Join(from, f))
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(pki, f), data, 0o600); err != nil { //nolint:gosec // the harness's own directory
				return nil, err
			}
		}
	}
	if len(spec.Patches) > 0 {
		node.PatchesDir = filepath.Join(etc, "patches")
		if err := os.MkdirAll(node.PatchesDir, 0o700); err != nil {
			return nil, err
		}
		for name, content := range spec.Patches {
			if err := os.WriteFile(filepath.Join(node.PatchesDir, name), []byte(content), 0o600); err != nil {
				return nil, err
			}
		}
	}
	opts.Log("%s: certificates and kubeconfigs with kubeadm", spec.Name)
	// Certificates and kubeconfigs go straight into the node's root: a
	// private copy of the configuration points kubeadm there.
	private := filepath.Join(root, "kubeadm-certs.yaml")
	clusterConfig := strings.Replace(n.ClusterConfig, "kind: ClusterConfiguration\n",
		"kind: ClusterConfiguration\ncertificatesDir: "+pki+"\n", 1)
	if err := os.WriteFile(private, []byte(node.ConfigFile(clusterConfig)), 0o600); err != nil {
		return nil, err
	}
	if _, err := n.Kubeadm(ctx, "init", "phase", "certs", "all", "--config", private); err != nil {
		return nil, err
	}
	if _, err := n.Kubeadm(ctx, "init", "phase", "kubeconfig", "all", "--config", private, "--kubeconfig-dir", etc); err != nil {
		return nil, err
	}
	opts.Log("%s: initial static Pod manifests with kubeadm", spec.Name)
	file := filepath.Join(root, "kubeadm.yaml")
	if err := os.WriteFile(file, []byte(node.ConfigFile(n.ClusterConfig)), 0o600); err != nil {
		return nil, err
	}
	if err := RenderManifests(ctx, n.Release.Kubeadm, file, node.ManifestsDir); err != nil {
		return nil, err
	}
	opts.Log("%s: the kubelet's files, the container runtime's socket and kubeadm of every release in its root", spec.Name)
	if err := n.setUpRoot(ctx, node, file); err != nil {
		return nil, err
	}
	if n.Etcd == EtcdStacked && len(n.Nodes) == 0 {
		opts.Log("%s: etcd manifest with kubeadm init phase etcd local", spec.Name)
		if err := n.initEtcd(ctx, node, file); err != nil {
			return nil, err
		}
	}
	return node, nil
}

// RenderManifests writes the static Pod manifests of kubeadm config file
// into dir with `kubeadm init phase control-plane all --dry-run`.
func RenderManifests(ctx context.Context, kubeadm, configFile, dir string) error {
	cmd := exec.CommandContext(ctx, kubeadm, "init", "phase", "control-plane", "all", "--config", configFile, "--dry-run")
	cmd.Env = append(os.Environ(), "KUBEADM_INIT_DRYRUN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubeadm init phase control-plane all: %w: %s", err, out)
	}
	return nil
}

// Kubeadm runs the kubeadm of the release the control plane started at.
func (n *Nodes) Kubeadm(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, n.Release.Kubeadm, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubeadm %v: %w: %s", args, err, out)
	}
	return out, nil
}

// Clientset returns a system:masters client through the load balancer.
func (n *Nodes) Clientset() (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfig(cfg)
}

// Stop stops the runners, all at once (one by one, the last members of a
// stacked etcd would lose quorum and their runners wait for API servers
// that cannot answer), then the load balancer and the external etcd.
func (n *Nodes) Stop() {
	var wg sync.WaitGroup
	for _, node := range n.Nodes {
		if node.Runner != nil {
			wg.Go(node.Runner.Stop)
		}
	}
	wg.Wait()
	for _, node := range n.Nodes {
		node.cri.stop()
	}
	if n.lb != nil {
		n.lb.Close()
	}
	n.base.Stop()
}
