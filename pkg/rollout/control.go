package rollout

import (
	"strings"
	"time"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// What operators do to a rollout while it runs, and how a rollout ends.

// Pause stops handing out turns; a node in progress still finishes. A
// rollout already paused is left as it is (changed false).
func (r *Record) Pause(c Clock) (changed bool, err error) {
	s := r.Status
	switch {
	case s == nil:
		return false, exitcode.New(exitcode.NotFound, ErrNoRollout)
	case s.Phase == Paused:
		return false, nil
	case s.Phase != running(s.Kind):
		return false, exitcode.Conflictf("rollout %d is %s; only a rollout in progress can be paused", s.ID, s.Phase)
	}
	s.Phase, s.Message = Paused, "paused by "+c.By
	return true, nil
}

// Resume hands out turns again after a pause, the canary's included: the
// canary has done its work, and no later node pauses the rollout again. A
// rollout in progress is left as it is (changed false).
func (r *Record) Resume(c Clock) (changed bool, err error) {
	s := r.Status
	switch {
	case s == nil:
		return false, exitcode.New(exitcode.NotFound, ErrNoRollout)
	case s.Phase == running(s.Kind):
		return false, nil
	case s.Phase != Paused:
		return false, exitcode.Conflictf("rollout %d is %s; only a paused rollout can be resumed", s.ID, s.Phase)
	}
	s.Phase, s.Canary, s.Message = running(s.Kind), 0, "resumed by "+c.By
	return true, nil
}

// Confirm keeps a rollout on trial: AwaitingConfirm -> Succeeded, before
// the agents revert it. A rollout already confirmed is left as it is
// (changed false).
func (r *Record) Confirm(c Clock) (changed bool, err error) {
	s := r.Status
	switch {
	case s == nil:
		return false, exitcode.New(exitcode.NotFound, ErrNoRollout)
	case s.Try == nil:
		return false, exitcode.Conflictf("rollout %d (%s) is not on trial: there is nothing to confirm", s.ID, s.Kind)
	case s.Phase == Succeeded && s.Try.ConfirmedBy != "":
		return false, nil
	case s.Phase != AwaitingConfirm:
		return false, exitcode.Conflictf("rollout %d is %s, not awaiting confirmation; it can be confirmed once every node is done", s.ID, s.Phase)
	}
	s.Try.ConfirmedBy, s.Try.ConfirmedAt = c.By, c.now()
	r.finish(c, Succeeded, "confirmed by "+c.By)
	return true, nil
}

// MarkDocumentRestored records that an undo or a revert put kubeadm-config
// back to its target (or, with message saying why, that it was left alone),
// so that no one does it twice; an undo or revert whose nodes are done ends
// with it. Marked already: changed false.
func (r *Record) MarkDocumentRestored(c Clock, message string) (changed bool, err error) {
	s := r.Status
	switch {
	case s == nil:
		return false, exitcode.New(exitcode.NotFound, ErrNoRollout)
	case s.Kind == KindRollout:
		return false, exitcode.Conflictf("rollout %d carries a new document: only an undo or a revert puts kubeadm-config back", s.ID)
	case s.DocumentRestored:
		return false, nil
	}
	s.DocumentRestored = true
	if message != "" {
		s.Message = upgrade.BoundReason(message)
	}
	if s.Phase.Active() && s.allDone() {
		r.finish(c, Succeeded, s.Message)
	}
	return true, nil
}

// finish ends the rollout in phase and writes its history entry: the only
// place that does, once per rollout.
func (r *Record) finish(c Clock, phase Phase, message string) {
	s := r.Status
	if note := s.abandonNote(); note != "" && !strings.Contains(message, note) {
		message = strings.TrimPrefix(message+"; "+note, "; ")
	}
	s.Phase, s.FinishedAt, s.Message = phase, c.now(), upgrade.BoundReason(message)
	r.History = append(r.History, HistoryEntry{ID: s.ID, Kind: s.Kind, TargetHash: s.Target.Hash, By: s.StartedBy,
		StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Outcome: phase, Message: s.Message})
	if len(r.History) > HistoryLength {
		r.History = r.History[len(r.History)-HistoryLength:]
	}
}

func (s *Status) allDone() bool {
	for _, n := range s.Nodes {
		if !n.Phase.Done() {
			return false
		}
	}
	return true
}

// stamp renders a recorded time as the record shows it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func joinNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
