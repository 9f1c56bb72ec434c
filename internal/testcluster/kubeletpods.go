package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// The Pods the scheduler binds to the node, besides its static Pods: the
// kubelet stand-in runs those it can, a Pod of one container whose image it
// has a binary for (RunnerOptions.Binaries) with restartPolicy Never, once,
// and reports it Running, then Succeeded or Failed by the exit code. That
// is kubeadm's upgrade health check, a Job that runs `pause -v` on a
// schedulable node (CreateJob). Any other Pod stays Pending, as on a node
// that cannot pull its image: the harness runs no addon (CoreDNS,
// kube-proxy) and no workload.

// podProcess is a Pod's container the runner started.
type podProcess struct {
	cmd     *exec.Cmd
	done    chan struct{}
	started metav1.Time
	// reported is the phase last written to the Pod's status.
	reported corev1.PodPhase
}

// syncPods starts the node's Pods it can run and reports on them, at most
// once a second.
func (r *Runner) syncPods() {
	if time.Since(r.podsSynced) < time.Second {
		return
	}
	r.podsSynced = time.Now()
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
	defer cancel()
	pods := r.opts.Client.CoreV1().Pods(metav1.NamespaceAll)
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", r.opts.Node).String()})
	if err != nil {
		return
	}
	seen := map[types.UID]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		seen[pod.UID] = true
		if _, mirror := pod.Annotations[annotationMirror]; mirror || pod.DeletionTimestamp != nil {
			continue
		}
		p := r.podProcs[pod.UID]
		if p == nil {
			if pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending {
				continue // another kubelet's, before a restart of the harness
			}
			if p = r.startPod(pod); p == nil {
				continue
			}
			r.podProcs[pod.UID] = p
		}
		r.reportPod(ctx, pod, p)
	}
	for uid, p := range r.podProcs {
		if !seen[uid] {
			p.kill()
			delete(r.podProcs, uid)
		}
	}
}

// startPod runs the Pod's container if the runner can, as the image's
// entrypoint would run it: command[0], or the image's own name, with the
// rest of command and args.
func (r *Runner) startPod(pod *corev1.Pod) *podProcess {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) > 0 || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return nil
	}
	c := pod.Spec.Containers[0]
	bin, ok := r.opts.Binaries[ImageKey(c.Image)]
	if !ok {
		return nil
	}
	argv0, _, _ := strings.Cut(ImageKey(c.Image), ":")
	args := c.Args
	if len(c.Command) > 0 {
		argv0, args = c.Command[0], append(append([]string{}, c.Command[1:]...), c.Args...)
	}
	if err := os.MkdirAll(r.opts.Logs, 0o700); err != nil {
		return nil
	}
	logFile, err := os.OpenFile(filepath.Join(r.opts.Logs, fmt.Sprintf("pod-%s-%s.log", pod.Namespace, pod.Name)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil
	}
	defer logFile.Close()
	cmd := &exec.Cmd{Path: bin, Args: append([]string{argv0}, args...), Dir: r.opts.Root, Stdout: logFile, Stderr: logFile,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}}
	if err := cmd.Start(); err != nil {
		r.opts.Log("%s: start Pod %s/%s: %v", r.opts.Node, pod.Namespace, pod.Name, err)
		return nil
	}
	r.opts.Log("%s: running Pod %s/%s (%s)", r.opts.Node, pod.Namespace, pod.Name, c.Image)
	p := &podProcess{cmd: cmd, done: make(chan struct{}), started: metav1.Now()}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

// reportPod writes the Pod's status when its phase changed.
func (r *Runner) reportPod(ctx context.Context, pod *corev1.Pod, p *podProcess) {
	c := pod.Spec.Containers[0]
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
	select {
	case <-p.done:
		code := int32(p.cmd.ProcessState.ExitCode()) //nolint:gosec // an exit status fits
		phase, reason := corev1.PodSucceeded, "Completed"
		if code != 0 {
			phase, reason = corev1.PodFailed, "Error"
		}
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: p.started, FinishedAt: metav1.Now()}
		pod.Status.Phase = phase
	default:
		cs.Ready, cs.State.Running = true, &corev1.ContainerStateRunning{StartedAt: p.started}
		pod.Status.Phase = corev1.PodRunning
	}
	if p.reported == pod.Status.Phase {
		return
	}
	pod.Status.StartTime = &p.started
	pod.Status.HostIP = r.opts.Address
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	if _, err := r.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err == nil {
		p.reported = pod.Status.Phase
	}
}

// kill ends the Pod's process, if it still runs.
func (p *podProcess) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stopPods ends every Pod process.
func (r *Runner) stopPods() {
	for uid, p := range r.podProcs {
		p.kill()
		delete(r.podProcs, uid)
	}
}
