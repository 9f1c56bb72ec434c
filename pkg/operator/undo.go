package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// BackupReasonUndo is the reason recorded in the backup of the document an
// undo replaces in kubeadm-config.
const BackupReasonUndo = "before rollout undo"

// NotTargetError is kubeadm-config holding another document than the target
// of the rollout an undo would take back: someone changed it since, and
// putting the previous document back would throw that change away.
type NotTargetError struct {
	// ConfigMap is kubeadm-config's namespace/name.
	ConfigMap string
	ID        int64
	// Pinned is the target the rollout pinned; Live what the ConfigMap
	// holds now, at LiveResourceVersion.
	Pinned, PinnedResourceVersion string
	Live, LiveResourceVersion     string
}

func (e *NotTargetError) Error() string {
	return fmt.Sprintf("configmap %s no longer holds the target of rollout %d: the rollout pinned %s (resourceVersion %s), "+
		"the ConfigMap now holds %s (resourceVersion %s); putting the previous document back would throw away the change made since",
		e.ConfigMap, e.ID, rollout.Short(e.Pinned), e.PinnedResourceVersion, rollout.Short(e.Live), e.LiveResourceVersion)
}

// UndoResult is what an undo did.
type UndoResult struct {
	*Change
	// Undone is the id of the rollout taken back.
	Undone int64
	// Document is the write that put kubeadm-config back; nil when nothing
	// was written (it held the document already, or was left alone).
	Document *engine.DocumentResult
	// LeftAlone says why kubeadm-config was not put back, when it was not:
	// it was changed between the check and the write.
	LeftAlone string
	// Resumed is true when an earlier undo had started but not put the
	// document back, and this one finished it.
	Resumed bool
}

// Undo takes the current rollout back: it checks that kubeadm-config still
// holds the rollout's target (refused with exit 4, a *NotTargetError, unless
// force), starts the undo in the record (a rollout of kind undo over the
// nodes the rollout changed, in reverse order), then writes the previous
// document back to kubeadm-config through Config, compare-and-swap, and
// marks it restored in the record. An undo that started but did not put the
// document back (the command died) is finished by the next Undo.
func (o *Rollouts) Undo(ctx context.Context, force bool) (*UndoResult, error) {
	r, cm, err := o.Read(ctx)
	if err != nil {
		return nil, err
	}
	undone := r.Status
	if undone == nil {
		return nil, exitcode.Conflictf("nothing to undo: %w in configmap %s", rollout.ErrNoRollout, o.recordName())
	}
	if s := undone; s.Kind == rollout.KindUndo && s.Phase.Active() && !s.DocumentRestored {
		res, err := o.restoreDocument(ctx, s.ID, r.Target, undoneBy(r), *s.Previous, force)
		if res != nil {
			res.Resumed, res.Undone = true, undoneBy(r)
		}
		return res, err
	}
	trial, err := rollout.FromConfigMap(cm) // a copy to try the undo on
	if err != nil {
		return nil, err
	}
	if err := trial.Undo(o.clock(), force); err != nil {
		return nil, err
	}
	if err := o.checkTarget(ctx, undone, force); err != nil {
		return nil, err
	}
	ch, err := o.transition(ctx, func(r *rollout.Record) (bool, error) {
		if r.Status == nil || r.Status.ID != undone.ID {
			return false, o.superseded(r.Status, undone.ID, "nothing was undone")
		}
		return true, r.Undo(o.clock(), force)
	}, func(s *rollout.Status) (string, string) {
		return "RolloutUndoStarted", fmt.Sprintf("rollout %d started by %s: undoes rollout %d, back to %s over %s",
			s.ID, s.StartedBy, undone.ID, rollout.Short(s.Target.Hash), orNone(s.Order))
	})
	if err != nil {
		return nil, err
	}
	res, err := o.restoreDocument(ctx, ch.Status.ID, trial.Target, undone.ID, undone.Target, force)
	if res != nil {
		res.Warnings = append(ch.Warnings, res.Warnings...)
	}
	return res, err
}

// undoneBy is the rollout the current undo takes back: the last one in the
// history before it whose target the undo starts from.
func undoneBy(r *rollout.Record) int64 {
	s := r.Status
	for i := len(r.History) - 1; i >= 0; i-- {
		if h := r.History[i]; h.ID < s.ID && h.TargetHash == s.Previous.Hash {
			return h.ID
		}
	}
	return s.ID - 1
}

// checkTarget refuses an undo of s when kubeadm-config holds neither its
// target nor its previous document, unless force.
func (o *Rollouts) checkTarget(ctx context.Context, s *rollout.Status, force bool) error {
	if force {
		return nil
	}
	cm, err := o.Config.Get(ctx)
	if err != nil {
		return err
	}
	return o.holdsTarget(cm, s.ID, s.Target, s.Previous.Hash)
}

// holdsTarget checks that cm holds the target pinned of rollout id, or the
// document the undo puts back (the previous one).
func (o *Rollouts) holdsTarget(cm *corev1.ConfigMap, id int64, pinned rollout.Ref, previous string) error {
	t := o.Config.Target()
	live := rollout.Hash([]byte(cm.Data[t.Key]))
	if live == pinned.Hash || live == previous {
		return nil
	}
	return exitcode.New(exitcode.Conflict, &NotTargetError{ConfigMap: t.Namespace + "/" + t.Name, ID: id,
		Pinned: pinned.Hash, PinnedResourceVersion: pinned.ResourceVersion, Live: live, LiveResourceVersion: cm.ResourceVersion})
}

// restoreDocument writes doc back to kubeadm-config for undo id, replacing
// the target of the rollout it undoes (undone), and marks it restored. A
// kubeadm-config changed meanwhile is left alone (unless force), and the
// record says so.
func (o *Rollouts) restoreDocument(ctx context.Context, id int64, doc []byte, undoneID int64, undone rollout.Ref, force bool) (*UndoResult, error) {
	out := &UndoResult{Undone: undoneID}
	res, err := o.Config.ReplaceDocument(ctx, doc, func(cm *corev1.ConfigMap) error {
		if force {
			return nil
		}
		return o.holdsTarget(cm, undoneID, undone, rollout.Hash(doc))
	})
	var notTarget *NotTargetError
	var message string
	var warnings []string
	switch {
	case errors.As(err, &notTarget):
		out.LeftAlone = notTarget.Error()
		message = "kubeadm-config was left alone: it was changed after the undo started (" + rollout.Short(notTarget.Live) +
			", resourceVersion " + notTarget.LiveResourceVersion + ")"
		warnings = append(warnings, message)
	case err != nil:
		return nil, exitcode.New(exitcode.FromError(err), fmt.Errorf(
			"undo rollout %d started, but configmap %s was not put back: %w; undo again to finish it", id, o.Config.Target().Name, err))
	case res.Changed:
		out.Document = res
		message = fmt.Sprintf("kubeadm-config put back to %s (resourceVersion %s)", rollout.Short(rollout.Hash(doc)), res.New.ResourceVersion)
	default:
		message = fmt.Sprintf("kubeadm-config already held %s", rollout.Short(rollout.Hash(doc)))
	}
	if res != nil {
		warnings = append(warnings, res.Warnings...)
	}
	ch, err := o.transition(ctx, func(r *rollout.Record) (bool, error) {
		if r.Status == nil || r.Status.ID != id {
			return false, o.superseded(r.Status, id, "the document was not marked restored")
		}
		return r.MarkDocumentRestored(o.clock(), message)
	}, func(s *rollout.Status) (string, string) {
		return "DocumentRestored", fmt.Sprintf("rollout %d: %s", s.ID, message)
	})
	if err != nil {
		return nil, err
	}
	ch.Warnings = append(warnings, ch.Warnings...)
	out.Change = ch
	return out, nil
}

// superseded says that rollout id is no longer the current one.
func (o *Rollouts) superseded(current *rollout.Status, id int64, what string) error {
	if current == nil {
		return exitcode.Conflictf("rollout %d is no longer recorded in configmap %s; %s", id, o.recordName(), what)
	}
	return exitcode.Conflictf("rollout %d is no longer the current one (rollout %d is, %s); %s", id, current.ID, current.Phase, what)
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "no node"
	}
	return strings.Join(names, ", ")
}
