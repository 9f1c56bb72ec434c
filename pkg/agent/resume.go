package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// Resuming a node whose turn an earlier agent began and did not finish
// (killed, rebooted): never starting it again, never leaving it
// half-changed.

// resume takes over the node's turn (ResumeNode: a resume, not a start)
// and completes it by applying the pinned target again: the components
// the earlier agent replaced compare equal and are waited for until
// healthy, the others are replaced as on any turn. When that fails, every
// component is put back on what it ran before the rollout: the manifest
// backups of the entry's config backup for those the earlier agent
// replaced, and for the rest what they run now, read before this run
// touches them.
//
// What stops a fresh turn before the node changes, and passes by itself (the
// manifests directory or the etcd lock busy, the API unreachable, an upgrade
// in progress), defers a resume the same way: the entry stays as the
// earlier agent left it, nothing is put back, and the resume is tried again
// on the next change or resync (notBegun's rule, endsTurn).
func (w *rollouts) resume(ctx context.Context, e *env, r *rollout.Record, entry rollout.Node) {
	s, node := r.Status, e.cfg.Name
	e.job(ctx, func(jctx, wctx context.Context) {
		before, berr := w.preRollout(e, entry)
		resumed := false
		rep, err := reconfigure.Run(jctx, e.nodeFor(r.Target), w.request(e, r, func([]string, string) error {
			if err := w.resumeNode(jctx, e, s, entry); err != nil {
				return err
			}
			resumed = true
			return nil
		}))
		if !resumed {
			if !endsTurn(err) {
				w.deferred(e, err, "node %s is in progress in %s %d, but cannot be resumed yet: %s", node, s.Kind, s.ID)
				return
			}
			// It cannot be completed: put it back, which is a resume too.
			if rerr := w.resumeNode(wctx, e, s, entry); rerr != nil {
				w.deferred(e, rerr, "node %s is in progress in %s %d, but cannot be resumed yet: %s", node, s.Kind, s.ID)
				return
			}
		}
		w.lastTurnErr = ""
		if err == nil {
			// Only the components the earlier agent meant to change: the
			// others' restarts say nothing about this rollout.
			var planned []controlplane.Component
			if len(entry.Components) > 0 {
				planned, err = controlplane.ParseComponents(entry.Components)
			}
			err = errors.Join(err, controlplane.WaitHealthy(jctx, rep.Plan, planned, controlplane.Options{Node: node, Pods: e.cfg.Config, Wait: e.cfg.Wait,
				Progress: func(ev controlplane.Event) {
					e.progress(reconfigure.Event{Kind: reconfigure.EventComponent, Component: ev})
				}}))
		}
		if err == nil {
			o := outcomeOf(rep, nil)
			o.Components = union(entry.Components, o.Components)
			if len(o.Components) > 0 {
				o.Phase = rollout.NodeUpdated
			}
			o.Message = strings.TrimPrefix(strings.Join([]string{"resumed by " + e.cfg.Identity, o.Message}, "; "), "; ")
			w.finish(wctx, e, s.ID, o, nil)
			return
		}
		why := "the resumed turn could not be completed: " + exitcode.Message(err)
		if berr != nil {
			w.finish(wctx, e, s.ID, rollout.Outcome{Phase: rollout.NodeRollbackFailed, Components: entry.Components,
				Message: why + "; and the manifests from before the rollout cannot be read: " + exitcode.Message(berr)}, err)
			return
		}
		e.log.warn("PuttingBack", "%s; putting node %s back on its manifests from before the rollout", why, node)
		_, perr := reconfigure.PutBack(wctx, e.cfg.Node, reconfigure.PutBackRequest{Manifests: before, Wait: e.cfg.Wait, Progress: e.progress})
		switch {
		case perr != nil && errors.As(perr, new(*reconfigure.StageError)) && !endsTurn(perr):
			// Refused before it changed anything, for what passes by itself:
			// the node stays in progress and is resumed again.
			w.deferred(e, perr, "node %s could not be put back yet: %s", node)
		case perr != nil:
			w.finish(wctx, e, s.ID, rollout.Outcome{Phase: rollout.NodeRollbackFailed, Components: entry.Components,
				Message: why + "; putting back the manifests from before the rollout failed: " + exitcode.Message(perr)}, perr)
		default:
			w.finish(wctx, e, s.ID, rollout.Outcome{Phase: rollout.NodeRolledBack, Components: entry.Components,
				Message: why + "; the node is back on its manifests from before the rollout"}, err)
		}
	})
}

// resumeNode records that this agent resumes the node (ResumeNode), with
// its Event.
func (w *rollouts) resumeNode(ctx context.Context, e *env, s *rollout.Status, entry rollout.Node) error {
	node := e.cfg.Name
	if !e.holds() {
		return errNotHeld
	}
	cm, _, err := w.updateOwn(ctx, e, func(r *rollout.Record, node string, c rollout.Clock) error {
		return r.ResumeNode(c, s.ID, node)
	})
	if err != nil {
		return err
	}
	e.log.event(ctx, cm, false, "NodeResumed", fmt.Sprintf("agent %s resumes node %s in %s %d (started by %s at %s)",
		e.cfg.Identity, node, s.Kind, s.ID, entry.Agent, stamp(entry.StartedAt)))
	return nil
}

// preRollout reads what each component ran before the rollout: the newest
// manifest backup of this node kept under the entry's config backup (the
// earlier agent replaced it), else the manifest it runs now (it was never
// replaced). The etcd member is put back only when it was replaced: it is
// left alone otherwise.
func (w *rollouts) preRollout(e *env, entry rollout.Node) (map[controlplane.Component][]byte, error) {
	out := map[controlplane.Component][]byte{}
	if entry.Backup != "" {
		names, err := e.cfg.Store.Manifests(entry.Backup)
		if err != nil {
			return nil, err
		}
		for _, name := range names { // oldest first: the newest wins
			m, err := e.cfg.Store.ReadManifest(name)
			if err != nil {
				return nil, err
			}
			if m.Node != e.cfg.Name {
				continue
			}
			if !m.ChecksumOK() {
				return nil, exitcode.Invalidf("manifest backup %s does not match its checksum", name)
			}
			c, err := controlplane.ParseComponents([]string{m.Component})
			if err != nil {
				return nil, fmt.Errorf("manifest backup %s: %w", name, err)
			}
			out[c[0]] = m.Manifest
		}
	}
	for _, c := range controlplane.Components() {
		if _, ok := out[c]; ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(e.cfg.ManifestsDir, c.File()))
		if err != nil {
			return nil, err
		}
		out[c] = data
	}
	return out, nil
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
