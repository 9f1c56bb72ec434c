package kubeadmupgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
//
// Whether kubeadm-config says the target is read again first, once the
// step may have written it (its upload-config phase began): a write whose
// answer was lost (an error although it landed) must not be followed by a
// put-back. When it cannot be read, nothing is put back either, and the
// error says so: the node is never said to be back unless the cluster is
// as it was. A step that never began upload-config did not write it (a
// step that found it written is past the point of no return from its
// start, Request.NoReturn), and is put back without asking an API server
// that may be down with the node's own control plane.
func (s *step) recover(ctx context.Context, failure *PhaseError) error {
	if s.rep.NoReturn || s.req.Kind == KubeletStep {
		return failure
	}
	if s.uploading {
		says, err := s.documentSays(ctx)
		switch {
		case err != nil:
			return &PutBackError{Failure: failure, Untried: true, Err: fmt.Errorf(
				"kubeadm-config could not be read to tell whether it says %s already (a write whose answer was lost may have landed), so the node was left as it is: %w", s.req.Version, err)}
		case says:
			s.rep.NoReturn = true
			s.emit(true, "UpgradeStep", "node %s: kubeadm-config says %s: past the point of no return, the node is not put back (recovery is forward)", s.node.Name, s.req.Version)
			return failure
		}
	}
	if !s.changed {
		// kubeadm's control-plane phase never ran in this step: the node's
		// manifests are as the step found them, whatever their health.
		failure.Back, failure.Unchanged = true, true
		return failure
	}
	kept, err := s.putBack(ctx)
	if err != nil {
		return &PutBackError{Failure: failure, Err: err}
	}
	failure.Back, failure.EtcdKept = true, kept
	return failure
}

// putBack puts the node's control plane back on From, from this step's
// manifest backup, unless it runs it healthy already (kubeadm put it back
// itself). A backup kubeadm made before this step (an earlier upgrade's)
// is never put back. The etcd member's manifest is put back only while
// another member of its cluster runs the release it goes back to
// (etcdStays): kept says why it was not.
func (s *step) putBack(ctx context.Context) (kept string, err error) {
	from, components := s.req.From, s.node.ComponentsOnNode()
	if err := controlplane.WaitVersion(ctx, s.node.ManifestsDir, components, from, s.options(min(s.req.Wait, quickLook))); err == nil {
		return "", nil
	}
	backup := s.backup()
	if backup == "" {
		return "", fmt.Errorf("kubeadm left no manifest backup of this step in %s to put back", s.node.tmpDir())
	}
	manifests := map[controlplane.Component][]byte{}
	for _, c := range components {
		data, err := os.ReadFile(filepath.Join(backup, c.File()))
		if errors.Is(err, os.ErrNotExist) {
			continue // kubeadm did not replace it
		}
		if err != nil {
			return "", err
		}
		manifests[c] = data
	}
	if old, ok := manifests[controlplane.Etcd]; ok {
		if kept = s.etcdStays(ctx, old); kept != "" {
			delete(manifests, controlplane.Etcd)
			s.emit(true, "PuttingBack", "node %s: %s", s.node.Name, kept)
		}
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
	if _, err := reconfigure.PutBack(ctx, s.node.Node, reconfigure.PutBackRequest{Manifests: manifests, Wait: s.req.Wait, Progress: progress, Locked: true}); err != nil {
		return kept, err
	}
	return kept, controlplane.WaitVersion(ctx, s.node.ManifestsDir, components, from, s.options(s.req.Wait))
}

// etcdStays says why the etcd member's manifest must not go back to old
// ("" when it may). A member of a newer etcd release may have moved its
// data to its own storage version (etcd does once every member of the
// cluster runs the new release: at once on a cluster of one member),
// which the older release refuses to start on; while another member
// still runs the older release, the cluster's version has not moved and
// the older release reads the data. Unless a member other than this
// node's is seen on old's release, the member stays as it is.
func (s *step) etcdStays(ctx context.Context, old []byte) string {
	oldRelease, err := etcdRelease(old)
	if err != nil {
		return "its etcd member stays as it is: the manifest to put back cannot be read: " + err.Error()
	}
	current, err := os.ReadFile(filepath.Join(s.node.ManifestsDir, controlplane.Etcd.File()))
	if err != nil {
		return "its etcd member stays as it is: its manifest cannot be read: " + err.Error()
	}
	newRelease, err := etcdRelease(current)
	if err != nil || newRelease == oldRelease {
		return "" // the same release: putting it back changes no data
	}
	stays := fmt.Sprintf("its etcd member stays on etcd %s, not put back to %s", newRelease, oldRelease)
	lctx, cancel := context.WithTimeout(ctx, quickLook)
	defer cancel()
	cl, err := s.etcdCluster(lctx)
	if err != nil || cl == nil {
		return fmt.Sprintf("%s: its cluster cannot tell whether another member still runs %s, and %s may have moved the data beyond what %s reads (%v)", stays, oldRelease, newRelease, oldRelease, err)
	}
	for _, m := range cl.Members {
		if m.ID != cl.Local && m.Status != nil && minorOf(m.Status.Version) == oldRelease {
			return ""
		}
	}
	return fmt.Sprintf("%s: no other member of its etcd cluster (%d in all) runs %s, so %s may have moved the data to a storage version %s refuses to start on", stays, len(cl.Members), oldRelease, newRelease, oldRelease)
}

// etcdRelease is the etcd release (major.minor) an etcd manifest runs, by
// its image's tag (3.6.8-0 is 3.6).
func etcdRelease(manifest []byte) (string, error) {
	m, err := controlplane.ParseManifest(manifest)
	if err != nil {
		return "", err
	}
	tag := controlplane.ImageTag(m.Pod.Spec.Containers[0].Image)
	if tag == "" {
		return "", fmt.Errorf("its image %s names no tag", m.Pod.Spec.Containers[0].Image)
	}
	return minorOf(strings.TrimPrefix(tag, "v")), nil
}

// minorOf is major.minor of a version such as 3.6.8 or 3.6.8-0.
func minorOf(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
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
