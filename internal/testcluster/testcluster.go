// Package testcluster starts a real Kubernetes control plane (etcd and
// kube-apiserver built by hack/testbin.sh) on loopback, for the plugin's e2e
// tests, benchmarks and demo. A plugin whose point is conflict-safe writes has
// to be proven against a real apiserver, not a fake clientset.
//
// The control plane serves only 127.0.0.1, uses RBAC, and knows two token
// users: an admin in system:masters and an unprivileged user.
package testcluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Context names in the kubeconfig the cluster writes.
const (
	AdminContext        = "admin"
	UnprivilegedContext = "unprivileged"
	// UnprivilegedUser is the user name the unprivileged token authenticates as.
	UnprivilegedUser = "unprivileged"
)

// Binaries are the control-plane programs a Cluster runs.
type Binaries struct {
	Etcd      string
	APIServer string
	Kubeadm   string
	// ControllerManager and Scheduler run only on the static Pod runner's
	// nodes (StartNodes).
	ControllerManager string
	Scheduler         string
	// KubeadmV1beta3 is kubeadm 1.36, the newest release that reads
	// kubeadm.k8s.io/v1beta3.
	KubeadmV1beta3 string
	// Etcdutl is the etcd release's offline tool, of etcd's version, for
	// tests that restore snapshots (`etcdutl snapshot restore`). Optional:
	// empty when hack/testbin.sh does not report it.
	Etcdutl string
	// Version is the Kubernetes version of Kubeadm, APIServer,
	// ControllerManager and Scheduler (v1.37.2); EtcdVersion is Etcd's
	// (v3.7.0), the one that release's kubeadm deploys.
	Version, EtcdVersion string
	// Previous is the release before (v1.36.3), which an upgrade starts
	// from: its kubeadm is KubeadmV1beta3.
	Previous Release
	// Nodebox is hack/tools/nodebox, the CRI endpoint, cp and pause a
	// node's root holds for kubeadm (see noderoot.go).
	Nodebox string
}

// Release is one Kubernetes release's control plane: its kubeadm, its
// components, and the etcd its kubeadm deploys.
type Release struct {
	Version                                          string
	Kubeadm, APIServer, ControllerManager, Scheduler string
	EtcdVersion, Etcd                                string
}

// Current is the release of Binaries' own control plane.
func (b Binaries) Current() Release {
	return Release{Version: b.Version, Kubeadm: b.Kubeadm, APIServer: b.APIServer, ControllerManager: b.ControllerManager,
		Scheduler: b.Scheduler, EtcdVersion: b.EtcdVersion, Etcd: b.Etcd}
}

// Releases are the releases built: the current one and the one before.
func (b Binaries) Releases() []Release {
	return []Release{b.Current(), b.Previous}
}

// Release is the built release of a Kubernetes version.
func (b Binaries) Release(version string) (Release, error) {
	var have []string
	for _, r := range b.Releases() {
		if r.Version == version {
			return r, nil
		}
		have = append(have, r.Version)
	}
	return Release{}, fmt.Errorf("no control plane of Kubernetes %s is built (make testbin builds %s)", version, strings.Join(have, " and "))
}

// Options tune how a cluster starts.
type Options struct {
	// Dir holds data, certificates, logs and the kubeconfig. Empty means a new
	// temporary directory that Stop removes.
	Dir string
	// Detach starts the processes in their own session so they outlive the
	// caller (the demo); Down stops them later from the pid files in Dir.
	Detach bool
	// Fsync keeps etcd's fsync on (benchmarks); tests turn it off for speed.
	Fsync bool
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// Cluster is a running etcd + kube-apiserver pair.
type Cluster struct {
	Dir        string
	URL        string // https://127.0.0.1:PORT
	Kubeconfig string // contexts AdminContext (current) and UnprivilegedContext
	EtcdURL    string
	Bins       Binaries

	AdminToken string
	UserToken  string

	ownDir bool
	procs  []*proc
	opts   Options
}

// proc is a started control-plane process; done closes when it exits.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// FindBinaries builds (first time only) and locates the control-plane binaries
// by running hack/testbin.sh from the repository root.
func FindBinaries() (Binaries, error) {
	root, err := RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "testbin.sh"))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("hack/testbin.sh: %w", err)
	}
	var b Binaries
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "ETCD_BIN":
			b.Etcd = v
		case "KUBE_APISERVER_BIN":
			b.APIServer = v
		case "KUBEADM_BIN":
			b.Kubeadm = v
		case "KUBE_CONTROLLER_MANAGER_BIN":
			b.ControllerManager = v
		case "KUBE_SCHEDULER_BIN":
			b.Scheduler = v
		case "KUBEADM_V1BETA3_BIN":
			b.KubeadmV1beta3 = v
		case "ETCDUTL_BIN":
			b.Etcdutl = v
		case "KUBERNETES_VERSION":
			b.Version = v
		case "ETCD_VERSION":
			b.EtcdVersion = v
		case "PREVIOUS_KUBERNETES_VERSION":
			b.Previous.Version = v
		case "PREVIOUS_KUBEADM_BIN":
			b.Previous.Kubeadm = v
		case "PREVIOUS_KUBE_APISERVER_BIN":
			b.Previous.APIServer = v
		case "PREVIOUS_KUBE_CONTROLLER_MANAGER_BIN":
			b.Previous.ControllerManager = v
		case "PREVIOUS_KUBE_SCHEDULER_BIN":
			b.Previous.Scheduler = v
		case "PREVIOUS_ETCD_VERSION":
			b.Previous.EtcdVersion = v
		case "PREVIOUS_ETCD_BIN":
			b.Previous.Etcd = v
		case "NODEBOX_BIN":
			b.Nodebox = v
		}
	}
	for _, r := range b.Releases() {
		if r.Version == "" || r.Kubeadm == "" || r.APIServer == "" || r.ControllerManager == "" || r.Scheduler == "" ||
			r.EtcdVersion == "" || r.Etcd == "" {
			return Binaries{}, fmt.Errorf("hack/testbin.sh did not report all binaries: %q", out)
		}
	}
	if b.KubeadmV1beta3 == "" || b.Nodebox == "" {
		return Binaries{}, fmt.Errorf("hack/testbin.sh did not report all binaries: %q", out)
	}
	return b, nil
}

// RepoRoot finds the plugin's module root by walking up to its go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/kubeadmcfg/kubectl-kubeadmcfg\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (no go.mod of the plugin above the working directory)")
		}
		dir = parent
	}
}

// Start builds nothing: it runs bins on free loopback ports and returns once
// the apiserver reports ready.
func Start(ctx context.Context, bins Binaries, opts Options) (*Cluster, error) {
	c := &Cluster{Bins: bins, opts: opts, Dir: opts.Dir}
	if c.Dir == "" {
		dir, err := os.MkdirTemp("", "kubeadmcfg-cluster-")
		if err != nil {
			return nil, err
		}
		c.Dir, c.ownDir = dir, true
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Log != nil {
		c.opts.Log(format, args...)
	}
}

func (c *Cluster) start(ctx context.Context) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	c.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	c.URL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	etcdArgs := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + c.EtcdURL,
		"--advertise-client-urls=" + c.EtcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--log-level=warn",
	}
	if !c.opts.Fsync {
		etcdArgs = append(etcdArgs, "--unsafe-no-fsync")
	}
	c.logf("starting etcd on %s", c.EtcdURL)
	if err := c.run("etcd", c.Bins.Etcd, etcdArgs); err != nil {
		return err
	}

	if err := c.writeAuth(); err != nil {
		return err
	}
	apiArgs := []string{
		"--etcd-servers=" + c.EtcdURL,
		"--cert-dir=" + filepath.Join(c.Dir, "pki"),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--service-cluster-ip-range=10.96.0.0/12",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(c.Dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(c.Dir, "sa.key"),
		"--authorization-mode=RBAC",
		"--token-auth-file=" + filepath.Join(c.Dir, "tokens.csv"),
		// No endpoint reconciler: it refuses a loopback advertise address, and
		// nothing here needs the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--v=0",
	}
	c.logf("starting kube-apiserver on %s", c.URL)
	if err := c.run("kube-apiserver", c.Bins.APIServer, apiArgs); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	return c.writeKubeconfig()
}

// run starts a control-plane process with its output in Dir/NAME.log and its
// pid in Dir/NAME.pid.
func (c *Cluster) run(name, bin string, args []string) error {
	logFile, err := os.OpenFile(filepath.Join(c.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if c.opts.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Die with the test binary so a crashed test leaves no servers
		// behind; signals to the caller's process group (a terminal's
		// Ctrl-C) are for the caller, which stops the cluster in order.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	c.procs = append(c.procs, p)
	return os.WriteFile(filepath.Join(c.Dir, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
}

// Process returns the running process of a control-plane component ("etcd"
// or "kube-apiserver"), for fault-injection tests.
func (c *Cluster) Process(name string) *os.Process {
	for _, p := range c.procs {
		if p.name == name {
			return p.cmd.Process
		}
	}
	return nil
}

// RestartAPIServer kills kube-apiserver with SIGKILL and starts it again on the
// same port, waiting until it is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	for i, p := range c.procs {
		if p.name != "kube-apiserver" {
			continue
		}
		_ = p.cmd.Process.Kill()
		<-p.done
		c.procs = append(c.procs[:i], c.procs[i+1:]...)
		if err := c.run(p.name, p.cmd.Path, p.cmd.Args[1:]); err != nil {
			return err
		}
		return c.waitReady(ctx)
	}
	return errors.New("kube-apiserver is not running")
}

func (c *Cluster) writeAuth() error {
	c.AdminToken, c.UserToken = randomToken(), randomToken()
	tokens := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n%s,%s,unprivileged-uid\n",
		c.AdminToken, c.UserToken, UnprivilegedUser)
	if err := os.WriteFile(filepath.Join(c.Dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(filepath.Join(c.Dir, "sa.key"), keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, "sa.pub"), pubPEM, 0o600)
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	client := &http.Client{
		Timeout: 2 * time.Second,
		// The serving certificate is generated by the apiserver at start-up;
		// readiness is all this probe asks, the kubeconfig pins the CA.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback readiness probe
	}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		for _, p := range c.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited: %s", p.name, lastLines(filepath.Join(c.Dir, p.name+".log"), 3))
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready (%s); logs in %s", last, c.Dir)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) writeKubeconfig() error {
	caData, err := os.ReadFile(filepath.Join(c.Dir, "pki", "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("read the apiserver's serving certificate: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: caData}
	cfg.AuthInfos[AdminContext] = &clientcmdapi.AuthInfo{Token: c.AdminToken}
	cfg.AuthInfos[UnprivilegedContext] = &clientcmdapi.AuthInfo{Token: c.UserToken}
	cfg.Contexts[AdminContext] = &clientcmdapi.Context{Cluster: "local", AuthInfo: AdminContext, Namespace: "kube-system"}
	cfg.Contexts[UnprivilegedContext] = &clientcmdapi.Context{Cluster: "local", AuthInfo: UnprivilegedContext, Namespace: "kube-system"}
	cfg.CurrentContext = AdminContext
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	return clientcmd.WriteToFile(*cfg, c.Kubeconfig)
}

// Clientset returns an admin client.
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	return c.ClientsetFor(AdminContext)
}

// ClientsetFor returns a client for one of the kubeconfig's contexts.
func (c *Cluster) ClientsetFor(contextName string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: contextName}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfig(cfg)
}

// Stop kills the processes and removes the directory if Start created it.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	c.procs = nil
	if c.ownDir {
		_ = os.RemoveAll(c.Dir)
	}
}
