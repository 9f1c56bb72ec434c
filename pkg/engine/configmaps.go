package engine

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ConfigMap reads another ConfigMap of the engine's namespace, read-only,
// or returns nil when there is none: reconfigure reads the upgrade record
// with it before it touches a node. It is retried as Get is, within the
// engine's timeout.
func (e *Engine) ConfigMap(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	other := &Engine{client: e.client, target: Target{Namespace: e.target.Namespace, Name: name}, opts: Options{Timeout: e.opts.Timeout}}
	cm, err := other.Get(ctx)
	if exitcode.FromError(err) == exitcode.NotFound {
		return nil, nil
	}
	return cm, err
}
