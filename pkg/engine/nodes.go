package engine

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControlPlaneLabel marks kubeadm's control-plane nodes.
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// ControlPlaneNodes lists the names of the nodes labelled as kubeadm's
// control plane, sorted (needs list on nodes, a cluster-wide right).
func (e *Engine) ControlPlaneNodes(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	list, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: ControlPlaneLabel})
	if err != nil {
		return nil, APIError(err, "list", "nodes")
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names, nil
}

// Node reads one Node, bounded by the timeout: a kubelet's version and
// readiness after an upgrade's kubelet step (get on nodes).
func (e *Engine) Node(ctx context.Context, name string) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, APIError(err, "get", "node "+name)
	}
	return n, nil
}
