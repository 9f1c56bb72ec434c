package agent

import (
	"context"
	"errors"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/uploadconfig"
)

// uploadConfig is the point of kubeadm's upload-config phase on the first
// node: from here kubeadm-config says the target. kubeadm never writes the
// document itself (its upload-config kubeadm sub-phase is not run): it is
// asked what it would write, and the engine writes that change as an edit
// re-applied on conflict, so a patch made meanwhile is never lost
// (pkg/uploadconfig). Then kubeadm uploads the kubelet's configuration.
func (w *upgrades) uploadConfig(ctx context.Context, s *stepRun) (string, error) {
	a := w.a
	res, err := uploadconfig.UpgradeDocument(ctx, a.cfg.Config, uploadconfig.Kubeadm{Path: a.kubeadmOf(s.version), Config: s.config})
	if err != nil {
		var kerr *uploadconfig.KubeadmError
		if errors.As(err, &kerr) {
			return strings.Join(kerr.Lines, " | "), err
		}
		return "", err
	}
	what := "already said " + s.version
	if res.Changed {
		what = "now says " + s.version + " (resourceVersion " + res.New.ResourceVersion + "), as kubeadm would have written it"
	}
	a.info("UpgradePhase", "node %s: kubeadm-config %s", a.cfg.Name, what)
	return w.kubeadm(ctx, s.version, s.runner.ID, "upgrade", "apply", "phase", "upload-config", "kubelet", "--config", s.config)
}
