package engine

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Nodes lists every Node of the cluster, read-only and bounded by the
// engine's timeout (list on nodes, a cluster-wide right): an upgrade's
// preflight reads from it which nodes are the control plane and which
// kubelet version each Node reports, as kubeadm's own version checks do.
func (e *Engine) Nodes(ctx context.Context) ([]corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	list, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, APIError(err, "list", "nodes")
	}
	return list.Items, nil
}
