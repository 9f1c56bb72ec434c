package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// The timer of a rollout on trial, which the agents enforce so that it
// runs without the client that started the rollout: past the deadline on
// the server's clock, one agent (the compare-and-swap picks it) turns the
// rollout into a revert, and one puts kubeadm-config back.

// expireTry reverts a rollout whose try ran out unconfirmed; false when the
// revert could not be written. An agent that comes second finds the revert
// made.
func (w *rollouts) expireTry(ctx context.Context, e *env) bool {
	var deadline string
	cm, r, err := w.update(ctx, e, func(r *rollout.Record) (bool, error) {
		if r.Status != nil && r.Status.Try != nil {
			deadline = stamp(r.Status.Try.Deadline)
		}
		return r.ExpireTry(w.clock(e))
	})
	if err != nil {
		e.log.warnOnce("TryExpired", "", "the try ran out, but the revert could not be recorded: %s; trying again with a backoff of up to %s",
			exitcode.Message(err), e.cfg.Resync)
		return false
	}
	e.log.recovered("TryExpired", "")
	if cm == nil { // another agent made the revert
		return true
	}
	e.log.event(ctx, cm, true, "TryExpired", fmt.Sprintf("not confirmed by %s: revert %d takes back %s", deadline, r.Status.ID, joinNames(r.Status.Order)))
	return true
}

// restoreDocument puts kubeadm-config back to what it held before the
// reverted rollout (the revert's target), with a compare-and-swap that
// requires it to hold the reverted rollout's target still: a document
// someone wrote since is left alone, and the record says so. Then it marks
// the document restored, once. It returns false when a write failed.
func (w *rollouts) restoreDocument(ctx context.Context, e *env, r *rollout.Record) bool {
	s := r.Status
	key := e.cfg.Config.Target().Key
	outcome := ""
	_, err := e.cfg.Config.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		doc, err := engine.DocumentOf(cm, e.cfg.Config.Target())
		if err != nil {
			return false, err
		}
		switch h := rollout.Hash([]byte(doc)); h {
		case s.Previous.Hash:
			cm.Data[key] = string(r.Target)
			outcome = fmt.Sprintf("kubeadm-config was put back from %s to %s", s.Previous.Hash, s.Target.Hash)
			return true, nil
		case s.Target.Hash:
			outcome = fmt.Sprintf("kubeadm-config holds %s already", s.Target.Hash)
		default:
			outcome = fmt.Sprintf("kubeadm-config was left alone: it holds %s, no longer the reverted target %s, so someone changed it since; the nodes go back to %s anyway",
				h, s.Previous.Hash, s.Target.Hash)
		}
		return false, nil
	})
	if err != nil {
		e.log.warnOnce("DocumentNotRestored", "", "revert %d: kubeadm-config could not be put back: %s; trying again with a backoff of up to %s",
			s.ID, exitcode.Message(err), e.cfg.Resync)
		return false
	}
	cm, _, err := w.update(ctx, e, func(r *rollout.Record) (bool, error) {
		if r.Status == nil || r.Status.ID != s.ID {
			return false, nil
		}
		return r.MarkDocumentRestored(w.clock(e), outcome)
	})
	if err != nil {
		e.log.warnOnce("DocumentNotRestored", "", "revert %d: %s, but the record could not say so: %s; trying again with a backoff of up to %s",
			s.ID, outcome, exitcode.Message(err), e.cfg.Resync)
		return false
	}
	e.log.recovered("DocumentNotRestored", "")
	if cm != nil {
		e.log.event(ctx, cm, false, "DocumentRestored", fmt.Sprintf("revert %d: %s", s.ID, outcome))
	}
	return true
}
