package engine

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Leases lists the Leases of the engine's namespace that carry the label
// selector, read-only: the rollout's preflight, status and nodes read the
// agents' Leases with it, bounded by the engine's timeout.
func (e *Engine) Leases(ctx context.Context, selector string) ([]coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	list, err := e.leases().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, APIError(err, "list", fmt.Sprintf("leases in %s", e.target.Namespace))
	}
	return list.Items, nil
}
