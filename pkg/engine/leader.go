package engine

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// LeaderCheck is the outcome of an --if-leader check.
type LeaderCheck struct {
	Lease    string // namespace/name
	Holder   string
	IsHolder bool
}

// CheckLeader reports whether identity holds the Lease ns/name. It matches
// the holderIdentity exactly, or in the "<identity>_<suffix>" form that
// kube-controller-manager and kube-scheduler write. This is how "only the
// active controller writes" is said without a platform-specific check.
func CheckLeader(ctx context.Context, client coordinationv1client.LeasesGetter, ns, name, identity string) (*LeaderCheck, error) {
	lease, err := client.Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, APIError(err, "get", fmt.Sprintf("lease %s/%s", ns, name))
	}
	c := &LeaderCheck{Lease: ns + "/" + name}
	if lease.Spec.HolderIdentity != nil {
		c.Holder = *lease.Spec.HolderIdentity
	}
	c.IsHolder = identity != "" && (c.Holder == identity || strings.HasPrefix(c.Holder, identity+"_"))
	return c, nil
}
