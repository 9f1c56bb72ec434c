package kubeadmupgrade

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
func (s *step) uploadConfig(ctx context.Context, _ string) error {
	res, err := uploadconfig.UpgradeDocument(ctx, s.node.Config, uploadconfig.Kubeadm{Path: s.node.Kubeadms.Of(s.req.Version), Config: s.config})
	if err != nil {
		var kerr *uploadconfig.KubeadmError
		if errors.As(err, &kerr) {
			return &outputError{msg: err.Error(), output: strings.Join(kerr.Lines, " | "), err: err}
		}
		return err
	}
	s.rep.NoReturn = true
	what := "already said " + s.req.Version
	if res.Changed {
		what = "now says " + s.req.Version + " (resourceVersion " + res.New.ResourceVersion + "), as kubeadm would have written it"
	}
	s.emit(false, "UpgradePhase", "node %s: kubeadm-config %s", s.node.Name, what)
	return s.kubeadm(ctx, "upgrade", string(Apply), "phase", "upload-config", "kubelet", "--config", s.config)
}
