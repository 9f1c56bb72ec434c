package agent

import (
	"context"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
)

// uploadConfig is the point of kubeadm's upload-config phase on the first
// node: the ClusterConfiguration says the target from here on, written by
// the engine (an edit re-applied on conflict, so a patch made meanwhile is
// never lost), never by kubeadm; then kubeadm uploads the kubelet's
// configuration.
func (w *upgrades) uploadConfig(ctx context.Context, s *stepRun) (string, error) {
	edit, err := clusterconfig.NewSetString("kubernetesVersion", s.version)
	if err != nil {
		return "", err
	}
	if _, err := w.a.cfg.Config.UpdateDocument(ctx, edit); err != nil {
		return "", err
	}
	return w.kubeadm(ctx, s.version, s.runner.ID, "upgrade", "apply", "phase", "upload-config", "kubelet", "--config", s.config)
}
