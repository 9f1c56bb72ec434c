package engine

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkLeader runs the leader guard: it returns a non-empty reason when this
// process must not write. It matches the Lease's holderIdentity exactly, or
// in the "<identity>_<suffix>" form that kube-controller-manager and
// kube-scheduler write. This is how "only the active controller writes" is
// said without a platform-specific check.
func (e *Engine) checkLeader(ctx context.Context) (string, error) {
	l := e.opts.Leader
	if l == nil {
		return "", nil
	}
	name := fmt.Sprintf("lease %s/%s", l.Namespace, l.Name)
	lease, err := e.client.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return "", APIError(err, "get", name)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if l.Identity != "" && (holder == l.Identity || strings.HasPrefix(holder, l.Identity+"_")) {
		return "", nil
	}
	if holder == "" {
		holder = "none"
	}
	return fmt.Sprintf("not the holder of %s (holder: %s)", name, holder), nil
}
