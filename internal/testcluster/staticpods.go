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
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"
)

// The static Pod runner stands in for the kubelet of a control-plane node,
// which the harness does not have. Like the kubelet it watches a manifests
// directory (ignoring dot-files), runs each manifest's command, with the
// real binaries instead of containers, restarts a component when its file
// changes, publishes a mirror Pod (kubernetes.io/config.mirror and
// config.hash, Ready from the manifest's own probe) and reports a crash
// loop when the process exits, restarting it with a backoff. Host paths
// under /etc/kubernetes that the manifest mounts are mapped into the node's
// root directory. Whoever reads the manifests, the mirror Pods and the
// probes cannot tell it from a kubelet.

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
	// host paths is Root/etc/kubernetes/X.
	Root string
	// ManifestsDir is the directory watched.
	ManifestsDir string
	// Binaries maps a manifest's command (kube-apiserver, ...) to a binary.
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
	Log   func(format string, args ...any)
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
	wg   sync.WaitGroup

	// Owned by the status loop.
	node      *corev1.Node
	heartbeat time.Time
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
	r.wg.Wait()
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

// start runs the manifest's command with the real binary and the host paths
// mapped.
func (r *Runner) start(p *staticPod) {
	c := p.pod.Spec.Containers[0]
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return
	}
	bin, ok := r.opts.Binaries[argv[0]]
	if !ok {
		r.opts.Log("%s: no binary for %q", r.opts.Node, argv[0])
		p.next = time.Now().Add(time.Hour)
		return
	}
	args := r.mapPaths(p.pod, argv[1:])
	if err := os.MkdirAll(r.opts.Logs, 0o700); err != nil {
		return
	}
	logFile, err := os.OpenFile(filepath.Join(r.opts.Logs, p.pod.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s starting (config hash %s)\n", time.Now().Format(time.RFC3339Nano), p.hash)
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = r.opts.Root, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.opts.Log("%s: start %s: %v", r.opts.Node, p.pod.Name, err)
		p.next = time.Now().Add(time.Second)
		return
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited, p.started = cmd, exited, time.Now()
}

// mapPaths rewrites the paths of the manifest's host-path mounts under
// /etc/kubernetes to their place in the node's root.
func (r *Runner) mapPaths(pod *corev1.Pod, args []string) []string {
	hostPaths := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	type mount struct{ from, to string }
	var mounts []mount
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		host := hostPaths[m.Name]
		if host == "/etc/kubernetes" || strings.HasPrefix(host, "/etc/kubernetes/") {
			mounts = append(mounts, mount{from: m.MountPath, to: filepath.Join(r.opts.Root, host)})
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].from) > len(mounts[j].from) })
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		for _, m := range mounts {
			if j := strings.Index(a, m.from); j >= 0 && (j == 0 || a[j-1] == '=') {
				rest := a[j+len(m.from):]
				if rest == "" || rest[0] == '/' {
					out[i] = a[:j] + m.to + rest
					break
				}
			}
		}
	}
	return out
}

// reap notices a process that exited: a crash, restarted after a backoff
// (1s, 2s, 4s, ... up to 10s) unless held.
func (r *Runner) reap(p *staticPod) {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.exited:
	default:
		return
	}
	p.lastExit = int32(p.cmd.ProcessState.ExitCode()) //nolint:gosec // an exit status fits
	p.cmd, p.exited, p.ready = nil, nil, false
	p.crashes++
	p.restarts++
	backoff := min(time.Second<<min(p.restarts-1, 4), 10*time.Second)
	p.next = time.Now().Add(backoff)
	r.opts.Log("%s: %s exited with code %d, restarting in %s", r.opts.Node, p.pod.Name, p.lastExit, backoff)
}

// grace is how long p may take to stop.
func (r *Runner) grace(p *staticPod) time.Duration {
	if r.opts.Grace > 0 {
		return r.opts.Grace
	}
	if g := p.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// terminate stops a process, as the kubelet does: SIGTERM, and SIGKILL
// after grace. It does not wait: p.stopping closes when the process is gone.
func (r *Runner) terminate(p *staticPod, grace time.Duration) {
	if p.cmd == nil {
		return
	}
	proc, exited := p.cmd.Process, p.exited
	p.cmd, p.exited, p.ready, p.stopping = nil, nil, false, exited
	_ = proc.Signal(syscall.SIGTERM)
	go func() {
		select {
		case <-exited:
		case <-time.After(grace):
			_ = proc.Kill()
		}
	}()
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
	resp, err := r.client.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// publish brings the mirror Pod in line with the static Pod: recreated when
// the manifest's hash changed or someone deleted it, its status updated when
// anything else changed. API errors (the API server may be the component
// restarting) are retried on the next round.
func (r *Runner) publish(p *staticPod) {
	r.mu.Lock()
	pod, hash := p.pod.DeepCopy(), p.hash
	status := r.status(p)
	r.mu.Unlock()
	cs := status.ContainerStatuses[0]
	state := fmt.Sprintf("%s/%v/%d/%v", hash, cs.Ready, cs.RestartCount, cs.State.Running != nil)
	if p.synced == state && time.Since(p.checked) < 2*time.Second {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	pods := r.opts.Client.CoreV1().Pods(namespaceOf(pod))
	name := pod.Name + "-" + r.opts.Node
	mirror, err := pods.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		mirror = nil
	case err != nil:
		return
	case mirror.Annotations[annotationHash] != hash:
		if err := deleteNow(ctx, pods, mirror); err != nil {
			return
		}
		mirror = nil
	case p.synced == state:
		p.checked = time.Now()
		return
	}
	if mirror == nil {
		m := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespaceOf(pod), Labels: pod.Labels, Annotations: map[string]string{},
		}, Spec: pod.Spec}
		for k, v := range pod.Annotations {
			m.Annotations[k] = v
		}
		m.Annotations[annotationMirror], m.Annotations[annotationHash] = hash, hash
		m.Annotations[annotationSource], m.Annotations[annotationSeen] = "file", time.Now().Format(time.RFC3339Nano)
		m.Spec.NodeName = r.opts.Node
		if r.node != nil {
			controller := true
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: r.node.Name, UID: r.node.UID, Controller: &controller}}
		}
		if mirror, err = pods.Create(ctx, m, metav1.CreateOptions{}); err != nil {
			if msg := err.Error(); !apierrors.IsAlreadyExists(err) && msg != p.lastErr {
				p.lastErr = msg // the API server may be starting: say it once
				r.opts.Log("%s: create mirror Pod %s: %v", r.opts.Node, name, err)
			}
			return
		}
	}
	mirror.Status = status
	if _, err := pods.UpdateStatus(ctx, mirror, metav1.UpdateOptions{}); err != nil {
		return
	}
	p.synced, p.checked = state, time.Now()
}

// registerNode creates the Node and keeps it alive as a kubelet does: its
// Lease in kube-node-lease renewed every 10s, its Ready condition posted.
func (r *Runner) registerNode() {
	if time.Since(r.heartbeat) < 10*time.Second {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	nodes := r.opts.Client.CoreV1().Nodes()
	if r.node == nil {
		node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.opts.Node, Labels: map[string]string{
			"kubernetes.io/hostname": r.opts.Node, "node-role.kubernetes.io/control-plane": "",
		}}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			node, err = nodes.Get(ctx, r.opts.Node, metav1.GetOptions{})
		}
		if err != nil {
			return
		}
		r.node = node
	}
	now := metav1.Now()
	node := r.node.DeepCopy()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "static Pod runner is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}}
	if r.opts.Address != "" {
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: r.opts.Address}}
	}
	updated, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) {
			if fresh, err := nodes.Get(ctx, r.opts.Node, metav1.GetOptions{}); err == nil {
				r.node = fresh
			}
		}
		return
	}
	r.node = updated
	leases := r.opts.Client.CoordinationV1().Leases("kube-node-lease")
	duration := int32(40)
	holder := r.opts.Node
	lease, err := leases.Get(ctx, r.opts.Node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		controller := true
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: r.opts.Node, Namespace: "kube-node-lease",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: updated.Name, UID: updated.UID, Controller: &controller}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration, RenewTime: &metav1.MicroTime{Time: now.Time}}}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	case err == nil:
		lease.Spec.RenewTime = &metav1.MicroTime{Time: now.Time}
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err == nil {
		r.heartbeat = time.Now()
	}
}

// status is the Pod status the kubelet would report.
func (r *Runner) status(p *staticPod) corev1.PodStatus {
	c := p.pod.Spec.Containers[0]
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: p.restarts, Ready: p.ready}
	switch {
	case p.cmd != nil:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
	case p.restarts == 0:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off restarting failed container %s", c.Name)}
	}
	if p.restarts > 0 {
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: p.lastExit, Reason: "Error"}
	}
	ready := corev1.ConditionFalse
	if p.ready {
		ready = corev1.ConditionTrue
	}
	return corev1.PodStatus{
		Phase:             corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}, {Type: corev1.ContainersReady, Status: ready}},
		ContainerStatuses: []corev1.ContainerStatus{cs},
	}
}

func (r *Runner) deleteMirror(pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	pods := r.opts.Client.CoreV1().Pods(namespaceOf(pod))
	mirror, err := pods.Get(ctx, pod.Name+"-"+r.opts.Node, metav1.GetOptions{})
	if err == nil {
		err = deleteNow(ctx, pods, mirror)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		r.opts.Log("%s: delete mirror Pod of %s: %v", r.opts.Node, pod.Name, err)
	}
}

// deleteNow deletes a mirror Pod at once, as the kubelet does: a Pod bound
// to a node is otherwise only marked for deletion, waiting for a kubelet.
func deleteNow(ctx context.Context, pods corev1client.PodInterface, pod *corev1.Pod) error {
	zero := int64(0)
	err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func namespaceOf(pod *corev1.Pod) string {
	if pod.Namespace == "" {
		return metav1.NamespaceSystem
	}
	return pod.Namespace
}
