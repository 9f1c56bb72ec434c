package rollout

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// How a rollout ended, as a wait for it judges each copy of the record.

// ErrStoppedWaiting is a wait that ended before its rollout did: the
// rollout goes on in the cluster, driven by the agents, and its outcome is
// not known (exit 7).
var ErrStoppedWaiting = errors.New("stopped waiting before the rollout ended")

// Ended says whether rollout id has ended in r, and how, as the error a
// wait for it returns: nil when every node runs the target (Succeeded, or
// AwaitingConfirm unless untilEnded); exit 8 naming the node that rolled
// itself back and the nodes left untouched after it; exit 9 naming the
// node whose rollback failed; exit 4 when it was undone or reverted; exit
// 7 (ErrStoppedWaiting) when the record no longer tells. s is the rollout
// when it is the current one.
func (r *Record) Ended(id int64, untilEnded bool) (s *Status, done bool, err error) {
	cur := r.Status
	if cur != nil && cur.ID == id {
		switch {
		case cur.Phase == Succeeded, cur.Phase == AwaitingConfirm && !untilEnded:
			return cur, true, nil
		case cur.Phase == Failed:
			return cur, true, cur.failure()
		}
		return cur, false, nil
	}
	for _, h := range r.History {
		if h.ID != id {
			continue
		}
		switch h.Outcome {
		case Succeeded:
			return nil, true, nil
		case Failed:
			code := exitcode.RolledBack
			if strings.Contains(h.Message, rollbackFailedWords) || strings.Contains(h.Message, abandonedWords) {
				code = exitcode.RollbackFailed
			}
			return nil, true, exitcode.New(code, fmt.Errorf("rollout %d failed: %s", id, h.Message))
		}
		return nil, true, exitcode.Conflictf("rollout %d was %s: %s", id, strings.ToLower(string(h.Outcome)), h.Message)
	}
	current := "no rollout is"
	if cur != nil {
		current = fmt.Sprintf("rollout %d is", cur.ID)
	}
	return nil, true, exitcode.New(exitcode.OutcomeUnknown, fmt.Errorf("%w: rollout %d is not in the record (%s current, and the history no longer lists it)",
		ErrStoppedWaiting, id, current))
}

// rollbackFailedWords are in the message of a rollout that failed because a
// node's rollback failed (FinishNode writes it), so that the history tells
// exit 9 from 8.
const rollbackFailedWords = "and so did its rollback"

// abandonedWords are in the message of a rollout that failed because a node
// was abandoned (Abandon writes it): its state is unknown, exit 9 too.
const abandonedWords = "was abandoned by"

// failure is the error of a failed rollout: exit 9 naming the node whose
// rollback failed, else exit 8 naming the node that rolled itself back and
// the nodes left untouched after it.
func (s *Status) failure() error {
	for _, n := range s.Nodes {
		if n.Phase == NodeRollbackFailed {
			return exitcode.New(exitcode.RollbackFailed, fmt.Errorf("rollout %d failed: %s", s.ID, s.Message))
		}
	}
	for i, n := range s.Nodes {
		if n.Phase == NodeRolledBack {
			var untouched []string
			for _, later := range s.Nodes[i+1:] {
				untouched = append(untouched, later.Name)
			}
			return exitcode.New(exitcode.RolledBack, fmt.Errorf("rollout %d failed: %s; the nodes after %s are untouched: %s",
				s.ID, s.Message, n.Name, joinNames(untouched)))
		}
	}
	return exitcode.Failuref("rollout %d failed: %s", s.ID, s.Message)
}

// Summary says where a rollout stands in one line: its phase, how many of
// its nodes are done, and the node in progress.
func (s *Status) Summary() string {
	done := 0
	for _, n := range s.Nodes {
		if n.Phase.Done() {
			done++
		}
	}
	out := fmt.Sprintf("%s, %d of %d nodes done", s.Phase, done, len(s.Nodes))
	if n := s.inProgress(); n != nil {
		out += ", node " + n.Name + " in progress"
	}
	return out
}
