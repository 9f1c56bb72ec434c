package operator

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// WaitOptions tune Wait.
type WaitOptions struct {
	// UntilEnded waits past AwaitingConfirm, until a rollout on trial is
	// confirmed or reverted. Without it a rollout whose every node runs its
	// target is done waiting: its agents enforce the try without anyone
	// watching.
	UntilEnded bool
	// Progress, when set, is called with the rollout as first read and on
	// every change after.
	Progress func(s *rollout.Status)
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
func (o *Rollouts) Wait(ctx context.Context, id int64, opts WaitOptions) (*rollout.Status, error) {
	r, cm, err := o.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, o.stoppedWaiting(id, nil, err)
		}
		return nil, err
	}
	s, done, err := r.Ended(id, opts.UntilEnded)
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
		r, err := rollout.FromConfigMap(cm)
		if err != nil {
			judged = err
			return true, err
		}
		s, done, err := r.Ended(id, opts.UntilEnded)
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

// stoppedWaiting is a wait that ended before rollout id did, for cause.
func (o *Rollouts) stoppedWaiting(id int64, last *rollout.Status, cause error) error {
	where := ""
	if last != nil && last.ID == id {
		where = ", " + last.Summary()
	}
	why := ""
	if cause != nil {
		why = ": " + cause.Error()
	}
	return exitcode.New(exitcode.OutcomeUnknown, fmt.Errorf("%w (rollout %d%s)%s; it goes on in the cluster without this command",
		rollout.ErrStoppedWaiting, id, where, why))
}
