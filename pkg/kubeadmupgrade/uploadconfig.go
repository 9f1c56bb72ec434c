package kubeadmupgrade

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/uploadconfig"
)

// uploadConfig is the point of kubeadm's upload-config phase on the first
// node: from here kubeadm-config says the target. kubeadm never writes the
// document itself (its upload-config kubeadm sub-phase is not run): it is
// asked what it would write, and the engine writes that change as an edit
// re-applied on conflict, so a patch made meanwhile is never lost
// (pkg/uploadconfig), with Env.ConfigWriter. Then kubeadm uploads the
// kubelet's configuration. A write that returns an error may have landed
// all the same (its answer lost): recover reads kubeadm-config again.
func (s *step) uploadConfig(ctx context.Context, _ string) error {
	s.uploading = true
	writer := s.node.ConfigWriter
	if writer == nil {
		writer = s.node.Config
	}
	res, err := uploadconfig.UpgradeDocument(ctx, writer, uploadconfig.Kubeadm{Path: s.node.Kubeadms.Of(s.req.Version), Config: s.config})
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

// DocumentSays reports whether the ClusterConfiguration of kubeadm-config,
// read through eng, says version: the first node's point of no return is
// past.
func DocumentSays(ctx context.Context, eng *engine.Engine, version string) (bool, error) {
	raw, err := eng.Document(ctx)
	if err != nil {
		return false, err
	}
	doc, err := clusterconfig.Parse([]byte(raw))
	if err != nil {
		return false, err
	}
	return doc.KubernetesVersion() == version, nil
}

// documentSays is DocumentSays, asked again within quickLook while the
// API server cannot answer (the first node's own may be restarting).
func (s *step) documentSays(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, quickLook)
	defer cancel()
	for {
		says, err := DocumentSays(ctx, s.node.Config, s.req.Version)
		if err == nil || !engine.IsRetryable(err) {
			return says, err
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(time.Second):
		}
	}
}
