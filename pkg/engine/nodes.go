package engine

import (
	"context"
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/managed"
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
// readiness after an upgrade's kubelet step. It lists the Node by name
// (list on nodes, which the agents hold), not a get.
func (e *Engine) Node(ctx context.Context, name string) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	list, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, APIError(err, "list", "nodes")
	}
	for i := range list.Items {
		if list.Items[i].Name == name {
			return &list.Items[i], nil
		}
	}
	return nil, exitcode.NotFoundf("node %s not found", name)
}

// NodeCondition reads node's condition of type t: nil when the Node has
// none. It lists the Node by name (list on nodes, which the agents hold),
// not a get: no right beyond what a turn needs already.
func (e *Engine) NodeCondition(ctx context.Context, node string, t corev1.NodeConditionType) (*corev1.NodeCondition, types.UID, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	var list *corev1.NodeList
	err := refusedRetry(ctx, func() (err error) {
		list, err = e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
		return err
	})
	if err != nil {
		return nil, "", APIError(err, "list", "nodes")
	}
	for _, n := range list.Items {
		if n.Name != node {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == t {
				return &c, n.UID, nil
			}
		}
		return nil, n.UID, nil
	}
	return nil, "", exitcode.NotFoundf("node %s not found", node)
}

// SetNodeCondition writes one condition of node's status, and no other
// field: a strategic merge patch of status.conditions, keyed by type, as
// node-problem-detector writes its own, so that the kubelet's conditions
// and anyone else's stay as they are (patch on nodes/status). It returns
// the Node's UID, for its Events. The read and the write are tried again
// when an API server that is shutting down refuses them.
func (e *Engine) SetNodeCondition(ctx context.Context, node string, c corev1.NodeCondition) (types.UID, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
	if err != nil {
		return "", err
	}
	var n *corev1.Node
	err = refusedRetry(ctx, func() (err error) {
		n, err = e.client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{FieldManager: managed.By}, "status")
		return err
	})
	if err != nil {
		return "", APIError(err, "patch", "the status of node "+node)
	}
	return n.UID, nil
}
