package testcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// The static Pod runner stands in for the kubelet of a control-plane node,
// which the harness does not have. Like the kubelet it watches a manifests
// directory (ignoring dot-files), runs each manifest's command, with the
// real binaries instead of containers, restarts a component when its file
// changes, publishes a mirror Pod (kubernetes.io/config.mirror and
// config.hash, Ready from the manifest's own probe) and reports a crash
// loop when the process exits, restarting it with a backoff. The host
// paths the manifest mounts that are the node's own (under /etc/kubernetes,
// and whatever the component may write, such as etcd's data directory) are
// mapped into the node's root directory. Whoever reads the manifests, the
// mirror Pods and the probes cannot tell it from a kubelet.

// Mirror Pod annotations the kubelet sets.
const (
	annotationMirror = "kubernetes.io/config.mirror"
	annotationHash   = "kubernetes.io/config.hash"
	annotationSource = "kubernetes.io/config.source"
	annotationSeen   = "kubernetes.io/config.seen"
)

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Node names the mirror Pods (<pod>-<node>) and their spec.nodeName.
	Node string
	// Root is the node's root directory: /etc/kubernetes/X in a manifest's
	// host paths is Root/etc/kubernetes/X, and so is a writable mount's
	// (/var/lib/etcd is Root/var/lib/etcd).
	Root string
	// ManifestsDir is the directory watched.
	ManifestsDir string
	// Binaries maps an image, by its name and tag without the registry
	// (kube-apiserver:v1.37.2, see ImageKey), to the binary that runs it:
	// the runner picks a static Pod's program by its image, as the kubelet
	// runs what the image holds.
	Binaries map[string]string
	// Client publishes the mirror Pods, and registers the Node and renews
	// its Lease as a kubelet does (without a Node, the controller-manager's
	// pod garbage collector deletes the mirror Pods).
	Client kubernetes.Interface
	// Address is the node's InternalIP.
	Address string
	// Logs is where each component's output goes (Root/logs when empty).
	Logs string
	// Grace is how long a component has to stop after SIGTERM before it is
	// killed: the manifest's terminationGracePeriodSeconds (30s unless set)
	// when zero. A kube-apiserver draining its watches takes all of it.
	Grace time.Duration
	// KubeletVersion is the version of the kubelet the runner stands in
	// for, as it starts: the Node reports it, and the runner serves the
	// kubelet's /healthz as Root/var/lib/kubelet/config.yaml says, and
	// restarts when the node's kubelet restart command asks (kubelet.go).
	// Empty, the runner does none of that.
	KubeletVersion string
	Log            func(format string, args ...any)
}

// PodStats is what the runner did with one static Pod, for tests.
type PodStats struct {
	// Hash is the config hash of the manifest it runs.
	Hash string
	// Updates counts the manifest changes it picked up (restarts for a new
	// manifest); Crashes the times the process exited by itself.
	Updates, Crashes int
	Running          bool
	Pid              int
	// Started is when the running process started; Updated when the
	// runner last picked up a new manifest; ReadySince when the running
	// process's probe first answered.
	Started, Updated, ReadySince time.Time
	Ready                        bool
}

// Runner runs a node's static Pods.
type Runner struct {
	opts   RunnerOptions
	client *http.Client

	mu   sync.Mutex
	pods map[string]*staticPod // by manifest file name
	stop chan struct{}
	// ctx is cancelled by Stop: the API calls and probes in flight end
	// at once rather than wait for an API server that is going away.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Owned by the status loop.
	node       *corev1.Node
	heartbeat  time.Time
	kubelet    kubeletState
	podProcs   map[types.UID]*podProcess // the Pods it runs (kubeletpods.go)
	podsSynced time.Time
}

type staticPod struct {
	file       string
	hash       string
	pod        *corev1.Pod
	cmd        *exec.Cmd
	exited     chan struct{}
	stopping   chan struct{} // closes when the process being stopped has exited
	updates    int
	crashes    int
	restarts   int32 // exits since the current manifest started
	held       bool
	ready      bool
	next       time.Time // when a crashed process may start again
	lastExit   int32
	probed     time.Time
	started    time.Time
	updated    time.Time
	readySince time.Time
	synced     string    // the mirror Pod state last published
	checked    time.Time // when the mirror Pod was last seen in place
	lastErr    string
	pullErr    string // why the image cannot run ("" when it can)
}

// ImageKey is an image's name and tag without its registry and path, by
// which RunnerOptions.Binaries names it: registry.k8s.io/kube-apiserver:v1.37.2
// is kube-apiserver:v1.37.2.
func ImageKey(image string) string {
	return image[strings.LastIndex(image, "/")+1:]
}

// imageNames are the images the runner has binaries for, sorted.
func (r *Runner) imageNames() []string {
	names := make([]string, 0, len(r.opts.Binaries))
	for k := range r.opts.Binaries {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// StartRunner starts watching opts.ManifestsDir.
func StartRunner(opts RunnerOptions) *Runner {
	if opts.Logs == "" {
		opts.Logs = filepath.Join(opts.Root, "logs")
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	r := &Runner{
		opts: opts,
		client: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}, //nolint:gosec // probes, as the kubelet's
		pods: map[string]*staticPod{},
		stop: make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.podProcs = map[types.UID]*podProcess{}
	if opts.KubeletVersion != "" {
		r.startKubelet(opts.KubeletVersion)
	}
	// Processes and the API are looked after apart, as in the kubelet: a
	// slow or absent API server must not delay noticing a crash.
	r.wg.Add(2)
	go r.every(200*time.Millisecond, r.syncProcesses)
	go r.every(500*time.Millisecond, r.syncStatus)
	return r
}

// Stop stops every component and the runner.
func (r *Runner) Stop() {
	select {
	case <-r.stop:
		return
	default:
	}
	close(r.stop)
	r.cancel()
	r.wg.Wait()
	r.stopKubelet()
	r.stopPods()
	r.mu.Lock()
	var stopping []chan struct{}
	for _, p := range r.pods {
		r.terminate(p, 2*time.Second)
		if p.stopping != nil {
			stopping = append(stopping, p.stopping)
		}
	}
	r.mu.Unlock()
	for _, c := range stopping {
		<-c
	}
}

// Stats reports on the static Pod named name (kube-apiserver, ...).
func (r *Runner) Stats(name string) PodStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		if p.pod.Name != name {
			continue
		}
		s := PodStats{Hash: p.hash, Updates: p.updates, Crashes: p.crashes, Ready: p.ready, Updated: p.updated, ReadySince: p.readySince}
		if p.cmd != nil {
			s.Running, s.Pid, s.Started = true, p.cmd.Process.Pid, p.started
		}
		return s
	}
	return PodStats{}
}

// Hold kills a component, as if it died, and keeps it from starting again
// until Release: a component that stays down.
func (r *Runner) Hold(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		if p.pod.Name == name {
			p.held = true
			if p.cmd != nil {
				_ = p.cmd.Process.Kill()
			}
		}
	}
}

// Release lets a held component start again.
func (r *Runner) Release(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		if p.pod.Name == name {
			p.held, p.next = false, time.Time{}
		}
	}
}

func (r *Runner) every(interval time.Duration, f func()) {
	defer r.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		f()
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// syncProcesses reads the directory and starts, stops and restarts the
// processes.
func (r *Runner) syncProcesses() {
	seen := r.scan()
	r.mu.Lock()
	defer r.mu.Unlock()
	for file, p := range r.pods {
		if _, ok := seen[file]; !ok {
			r.terminate(p, r.grace(p))
			delete(r.pods, file)
			go r.deleteMirror(p.pod)
		}
	}
	for file, m := range seen {
		p := r.pods[file]
		switch {
		case p == nil:
			p = &staticPod{file: file, hash: m.hash, pod: m.pod}
			r.pods[file] = p
		case p.hash != m.hash:
			r.opts.Log("%s: %s changed (config hash %s -> %s), restarting", r.opts.Node, file, p.hash, m.hash)
			r.terminate(p, r.grace(p))
			p.hash, p.pod, p.updates, p.restarts, p.next, p.updated = m.hash, m.pod, p.updates+1, 0, time.Time{}, time.Now()
			p.pullErr = ""
		}
		r.reap(p)
		if p.stopping != nil {
			select {
			case <-p.stopping:
				p.stopping = nil // the old process is gone: its ports are free
			default:
				continue
			}
		}
		if p.cmd == nil && !p.held && !time.Now().Before(p.next) {
			r.start(p)
		}
	}
}

// syncStatus keeps the Node alive, probes the components and publishes the
// mirror Pods.
func (r *Runner) syncStatus() {
	if r.opts.KubeletVersion != "" {
		r.syncKubelet()
		if r.kubelet.down != "" {
			return // no heartbeat, as from a kubelet that is not running
		}
		r.syncPods()
	}
	r.registerNode()
	r.mu.Lock()
	pods := make([]*staticPod, 0, len(r.pods))
	for _, p := range r.pods {
		pods = append(pods, p)
	}
	r.mu.Unlock()
	for _, p := range pods {
		r.probe(p)
		r.publish(p)
	}
}

// manifest is one file of the manifests directory.
type manifest struct {
	hash string
	pod  *corev1.Pod
}

// scan reads the manifests directory as the kubelet does: every regular
// file whose name does not start with a dot.
func (r *Runner) scan() map[string]manifest {
	out := map[string]manifest{}
	entries, err := os.ReadDir(r.opts.ManifestsDir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(r.opts.ManifestsDir, e.Name()))
		if err != nil {
			continue
		}
		var pod corev1.Pod
		if err := yaml.Unmarshal(data, &pod); err != nil || len(pod.Spec.Containers) == 0 {
			r.opts.Log("%s: ignoring %s: not a Pod manifest", r.opts.Node, e.Name())
			continue
		}
		out[e.Name()] = manifest{hash: contentHash(data), pod: &pod}
	}
	return out
}

// contentHash stands in for the kubelet's hash of the Pod: it changes when
// the manifest does.
func contentHash(data []byte) string {
	h := fnv.New32a()
	_, _ = h.Write(data)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// probe runs the manifest's readiness probe (else its liveness probe) at
// most once a second.
func (r *Runner) probe(p *staticPod) {
	r.mu.Lock()
	running := p.cmd != nil
	due := time.Since(p.probed) >= time.Second
	pod, hash := p.pod, p.hash
	r.mu.Unlock()
	if !running {
		return
	}
	if !due {
		return
	}
	ready := r.check(pod)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.hash == hash && p.cmd != nil {
		if ready && !p.ready && p.started.After(p.readySince) {
			p.readySince = time.Now()
		}
		p.ready, p.probed = ready, time.Now()
	}
}

func (r *Runner) check(pod *corev1.Pod) bool {
	c := pod.Spec.Containers[0]
	var get *corev1.HTTPGetAction
	for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		if probe != nil && probe.HTTPGet != nil {
			get = probe.HTTPGet
			break
		}
	}
	if get == nil {
		return true
	}
	port := get.Port.IntValue()
	if get.Port.Type == intstr.String {
		for _, cp := range c.Ports {
			if cp.Name == get.Port.StrVal {
				port = int(cp.ContainerPort)
			}
		}
	}
	host := get.Host
	if host == "" {
		host = "127.0.0.1"
	}
	url := fmt.Sprintf("%s://%s%s", strings.ToLower(string(get.Scheme)), net.JoinHostPort(host, strconv.Itoa(port)), get.Path)
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}
