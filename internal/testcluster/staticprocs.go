package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The processes of the static Pods: started with the node's paths, stopped
// with a grace period, reaped when they exit.

// start runs the manifest's command with the real binary and the host paths
// mapped.
func (r *Runner) start(p *staticPod) {
	c := p.pod.Spec.Containers[0]
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return
	}
	// The image is what the kubelet pulls and runs; here it names the
	// binary. An image the harness has no binary for is one no registry
	// serves: the Pod stays Pending, as with ErrImagePull, until its
	// manifest changes.
	bin, ok := r.opts.Binaries[ImageKey(c.Image)]
	if !ok {
		if p.pullErr == "" {
			r.opts.Log("%s: %s: no binary for image %s", r.opts.Node, p.pod.Name, c.Image)
		}
		p.pullErr = fmt.Sprintf("no binary for image %s: the harness builds %s", c.Image, strings.Join(r.imageNames(), ", "))
		p.next = time.Now().Add(time.Hour)
		return
	}
	p.pullErr = ""
	args := mapPaths(r.opts.Root, p.pod, argv[1:])
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
	// Its own process group: a terminal's Ctrl-C, or a signal to the
	// caller's group, is for the caller, not for the node's components,
	// which the runner stops in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
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

// mapPaths rewrites, in args, the paths of the manifest's host-path mounts
// that are the node's own to their place in the node's root: those under
// /etc/kubernetes, and every mount the container may write, such as etcd's
// data directory (wherever etcd.local.dataDir puts it). Nothing a
// component writes lands outside the root; read-only system paths (CA
// bundles) stay the host's.
func mapPaths(root string, pod *corev1.Pod, args []string) []string {
	hostPaths := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	type mount struct{ from, to string }
	var mounts []mount
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		host, ok := hostPaths[m.Name]
		if ok && (host == "/etc/kubernetes" || strings.HasPrefix(host, "/etc/kubernetes/") || !m.ReadOnly) {
			mounts = append(mounts, mount{from: m.MountPath, to: filepath.Join(root, host)})
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
