package testcluster

import (
	"context"
	"fmt"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// What the runner tells the API server, as a kubelet does: the Node, its
// Lease, and a mirror Pod per static Pod with its status.

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
	state := fmt.Sprintf("%s/%v/%d/%v/%s", hash, cs.Ready, cs.RestartCount, cs.State.Running != nil, status.Phase)
	if p.synced == state && time.Since(p.checked) < 2*time.Second {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
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
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
	defer cancel()
	nodes := r.opts.Client.CoreV1().Nodes()
	if r.node == nil {
		node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.opts.Node, Labels: map[string]string{
			"kubernetes.io/hostname": r.opts.Node, "node-role.kubernetes.io/control-plane": "",
			"kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
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
	if r.kubelet.version != "" {
		node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: r.kubelet.version, OperatingSystem: "linux",
			Architecture: runtime.GOARCH, ContainerRuntimeVersion: "nodebox://0.1.0"}
		// What a kubelet reports it can hold: without a Pod capacity the
		// scheduler binds no Pod to the node.
		node.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"),
			corev1.ResourceCPU: *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("8Gi")}
		node.Status.Allocatable = node.Status.Capacity
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
	phase := corev1.PodRunning
	switch {
	case p.cmd != nil:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
	case p.pullErr != "":
		// A container that never started leaves its Pod Pending.
		phase = corev1.PodPending
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: p.pullErr}
	case p.restarts == 0:
		// Not started yet for this manifest: the Pod is Pending until its
		// container starts (kubeadm upgrade waits for Running).
		phase = corev1.PodPending
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
		Phase:             phase,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}, {Type: corev1.ContainersReady, Status: ready}},
		ContainerStatuses: []corev1.ContainerStatus{cs},
	}
}

func (r *Runner) deleteMirror(pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
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
