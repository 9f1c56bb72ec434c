package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// ErrStoppedWaiting is a wait that ended before its rollout did: the
// rollout goes on in the cluster, driven by the agents, and its outcome is
// not known (exit 7).
var ErrStoppedWaiting = errors.New("stopped waiting before the rollout ended")

// WaitOptions tune Wait.
type WaitOptions struct {
	// UntilEnded waits past AwaitingConfirm, until a rollout on trial is
	// confirmed or reverted. Without it a rollout whose every node runs its
	// target is done waiting: its agents enforce the try without anyone
	// watching.
	UntilEnded bool
	// Progress, when set, is called with the rollout as first read and on
	// every change after.
	Progress func(s *Status)
}

// Wait follows the record with a watch until rollout id ends, and returns
// the rollout as last seen with an error whose exit code says how it ended:
//   - nil: every node runs the target (Succeeded, or AwaitingConfirm
//     without UntilEnded);
//   - 8: it stopped on a node that rolled itself back, named, and the nodes
//     after it are untouched;
//   - 9: a node's rollback failed, named: a component of it may be down;
//   - 4: it was undone or reverted;
//   - 7 (ErrStoppedWaiting): the outcome is unknown: ctx ended first, the
//     watch broke, the record was deleted, or the rollout is gone from the
//     history;
//   - 3: the record is damaged.
func (o *Operator) Wait(ctx context.Context, id int64, opts WaitOptions) (*Status, error) {
	r, cm, err := o.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, o.stoppedWaiting(id, nil, err)
		}
		return nil, err
	}
	s, done, err := waitJudge(r, id, opts.UntilEnded)
	if opts.Progress != nil && s != nil {
		opts.Progress(s)
	}
	if done || cm == nil {
		if !done {
			err = o.stoppedWaiting(id, nil, errors.New("the rollout record does not exist"))
		}
		return s, err
	}
	last, finished := s, false
	var judged error
	werr := o.Record.Watch(ctx, cm.ResourceVersion, func(ev watch.EventType, cm *corev1.ConfigMap) (bool, error) {
		if ev == watch.Deleted {
			judged = o.stoppedWaiting(id, last, errors.New("the rollout record was deleted"))
			return true, judged
		}
		r, err := FromConfigMap(cm)
		if err != nil {
			judged = err
			return true, err
		}
		s, done, err := waitJudge(r, id, opts.UntilEnded)
		if s != nil {
			last = s
			if opts.Progress != nil {
				opts.Progress(s)
			}
		}
		finished, judged = done, err
		return done, err
	})
	switch {
	case judged != nil: // the handler's verdict, which Watch returned
		return last, judged
	case werr != nil:
		return last, o.stoppedWaiting(id, last, werr)
	case !finished:
		return last, o.stoppedWaiting(id, last, ctx.Err())
	}
	return last, nil
}

// waitJudge says whether rollout id has ended in r, and how: the error Wait
// returns. s is the rollout when it is the current one.
func waitJudge(r *Record, id int64, untilEnded bool) (s *Status, done bool, err error) {
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
			if strings.Contains(h.Message, rollbackFailedWords) {
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

// stoppedWaiting is a wait that ended before rollout id did, for cause.
func (o *Operator) stoppedWaiting(id int64, last *Status, cause error) error {
	where := ""
	if last != nil && last.ID == id {
		where = ", " + last.Summary()
	}
	why := ""
	if cause != nil {
		why = ": " + cause.Error()
	}
	return exitcode.New(exitcode.OutcomeUnknown, fmt.Errorf("%w (rollout %d%s)%s; it goes on in the cluster without this command",
		ErrStoppedWaiting, id, where, why))
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
