package reconfigure

import (
	"context"
	"fmt"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
)

// compareEtcd renders the node's local etcd member, when it has one (an
// etcd manifest in the manifests directory) and the ClusterConfiguration's
// etcd is local, and compares it with the running one. A difference, or a
// failure to tell, is a warning, and the run is then not recorded as the
// node's last known good: reconfigure does not change etcd. External etcd,
// or a node without a member, has nothing to compare.
func (r *run) compareEtcd(ctx context.Context, renderer controlplane.Renderer, src *source, file []byte, rep *Report) {
	if src.doc.ExternalEtcd() {
		return
	}
	diff, err := r.etcdDifference(ctx, renderer, file)
	if err == nil && diff == "" {
		return
	}
	r.etcdDiffers = true
	rep.Warnings = append(rep.Warnings, &EtcdError{Difference: diff, Err: err})
}

// etcdDifference is controlplane.CompareEtcd of the running and rendered
// etcd manifests; "" when the node runs none.
func (r *run) etcdDifference(ctx context.Context, renderer controlplane.Renderer, file []byte) (string, error) {
	running, err := controlplane.ReadEtcd(r.req.ManifestsDir)
	if err != nil || running == nil {
		return "", err
	}
	out, err := renderer.Render(ctx, file, []controlplane.Component{controlplane.Etcd})
	if err != nil {
		return "", err
	}
	rendered, err := controlplane.ParseManifest(out[controlplane.Etcd])
	if err != nil {
		return "", fmt.Errorf("kubeadm's etcd manifest: %w", err)
	}
	return controlplane.CompareEtcd(running, rendered), nil
}
