package kubeadmupgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// quickLook bounds the look at whether kubeadm put a failed node back
// itself.
const quickLook = time.Minute

// recover ends a failed step. Before kubeadm-config says the target (the
// first node's point of no return), a failed control-plane node is put
// back on what it ran: kubeadm puts its manifests back when a component
// does not come up; the step checks, and puts back what kubeadm left from
// the manifest backup it made in this step. After it, and for a kubelet
// step (the kubelet is the node's own: nothing puts it back but the
// operator's command, which upgrade-resume runs again), recovery is
// forward: the node stays as it is.
func (s *step) recover(ctx context.Context, failure *PhaseError) error {
	if s.rep.NoReturn || s.req.Kind == KubeletStep {
		return failure
	}
	if !s.changed {
		// kubeadm's control-plane phase never ran in this step: the node's
		// manifests are as the step found them, whatever their health.
		failure.Back, failure.Unchanged = true, true
		return failure
	}
	if err := s.putBack(ctx); err != nil {
		return &PutBackError{Failure: failure, Err: err}
	}
	failure.Back = true
	return failure
}

// putBack puts the node's control plane back on From, from this step's
// manifest backup, unless it runs it healthy already (kubeadm put it back
// itself). A backup kubeadm made before this step
// (an earlier upgrade's) is never put back.
func (s *step) putBack(ctx context.Context) error {
	from, components := s.req.From, s.node.ComponentsOnNode()
	if err := controlplane.WaitVersion(ctx, s.node.ManifestsDir, components, from, s.options(min(s.req.Wait, quickLook))); err == nil {
		return nil
	}
	backup := s.backup()
	if backup == "" {
		return fmt.Errorf("kubeadm left no manifest backup of this step in %s to put back", s.node.tmpDir())
	}
	manifests := map[controlplane.Component][]byte{}
	for _, c := range components {
		data, err := os.ReadFile(filepath.Join(backup, c.File()))
		if errors.Is(err, os.ErrNotExist) {
			continue // kubeadm did not replace it
		}
		if err != nil {
			return err
		}
		manifests[c] = data
	}
	s.emit(true, "PuttingBack", "node %s: putting its control plane back on %s from kubeadm's backup %s", s.node.Name, from, backup)
	progress := func(e reconfigure.Event) {
		switch {
		case s.req.Progress == nil:
		case e.Kind == reconfigure.EventComponent:
			s.req.Progress(Event{Component: &e.Component})
		default:
			s.req.Progress(Event{Warning: e.Kind == reconfigure.EventWarning, Reason: "Reconfigure", Message: e.Message})
		}
	}
	if _, err := reconfigure.PutBack(ctx, s.node.Node, reconfigure.PutBackRequest{Manifests: manifests, Wait: s.req.Wait, Progress: progress}); err != nil {
		return err
	}
	return controlplane.WaitVersion(ctx, s.node.ManifestsDir, components, from, s.options(s.req.Wait))
}

// backup is the newest manifest backup kubeadm made in this step; "" when
// it made none.
func (s *step) backup() string {
	var made []string
	for _, dir := range manifestBackups(s.node.tmpDir()) {
		if !slices.Contains(s.before, dir) {
			made = append(made, dir)
		}
	}
	if len(made) == 0 {
		return ""
	}
	return made[len(made)-1]
}

// manifestBackups are the manifest backups kubeadm left in dir, oldest
// first (kubeadm names them by their time).
func manifestBackups(dir string) []string {
	dirs, _ := filepath.Glob(filepath.Join(dir, "kubeadm-backup-manifests-*"))
	slices.Sort(dirs)
	return dirs
}
