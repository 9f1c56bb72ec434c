package agent

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// rollouts is the work a configuration rollout asks of the node: report a
// damaged record, expire a try, put kubeadm-config back for a revert, and
// take the node's turn or resume it.
type rollouts struct {
	a *Agent

	damagedRV   string // the damaged record version already reported
	lastTurnErr string // why the node's turn was last deferred
}

// do does what the record as last seen asks of this agent, and asks to look
// again when a try is due to expire before the next resync.
func (w *rollouts) do(ctx context.Context) time.Duration {
	a := w.a
	if a.view.Rollout == nil {
		return 0
	}
	r, err := rollout.FromConfigMap(a.view.Rollout)
	if err != nil {
		w.damaged(ctx, err)
		return 0
	}
	w.damagedRV = ""
	s := r.Status
	if s == nil {
		return 0
	}
	if s.TryExpired(a.cfg.Clock.Now()) {
		w.expireTry(ctx)
		return 0 // the revert comes back through the watch
	}
	if s.Kind == rollout.KindRevert && s.Phase.Active() && !s.DocumentRestored {
		w.restoreDocument(ctx, r)
	}
	node := a.cfg.Name
	entry, ok := s.Lookup(node)
	switch {
	case !ok || !s.Phase.Active() || a.view.Config == nil:
	case entry.Phase == rollout.NodeInProgress:
		// This agent holds the node's Lease, so no other agent of the node
		// is alive: the entry is a turn an earlier agent did not finish.
		w.resume(ctx, r, entry)
	default:
		if turn, ok := s.Turn(); ok && turn == node {
			w.turn(ctx, r)
		}
	}
	return w.untilExpiry()
}

// untilExpiry is the time until the try of the rollout as last seen runs
// out, with a second's margin; 0 when none runs.
func (w *rollouts) untilExpiry() time.Duration {
	a := w.a
	if a.view.Rollout == nil {
		return 0
	}
	r, err := rollout.FromConfigMap(a.view.Rollout)
	if err != nil || r.Status == nil || r.Status.Phase != rollout.AwaitingConfirm || r.Status.Try == nil {
		return 0
	}
	return max(r.Status.Try.Deadline.Sub(a.cfg.Clock.Now())+time.Second, 100*time.Millisecond)
}

// damaged reports a record no agent may act on, once per version of it:
// nothing on the node is touched until it is fixed or deleted.
func (w *rollouts) damaged(ctx context.Context, err error) {
	a := w.a
	if a.view.Rollout.ResourceVersion == w.damagedRV {
		return
	}
	w.damagedRV = a.view.Rollout.ResourceVersion
	msg := exitcode.Message(err) + "; this agent changes nothing on node " + a.cfg.Name + " until it is"
	if !errors.As(err, new(*rollout.DamagedError)) {
		msg = "cannot read the rollout record: " + msg
	}
	a.event(ctx, a.view.Rollout, true, "RecordDamaged", msg)
}

// update changes the record with a compare-and-swap and returns the
// ConfigMap written (nil when change had nothing to change) and the record
// as change left it. The copy written becomes the record as last seen: it
// is the newest the agent knows of, and a change of kubeadm-config that
// arrives before the watch's copy of it must not have the agent act on an
// older one (take a turn it has just finished, say).
func (w *rollouts) update(ctx context.Context, change func(r *rollout.Record) (bool, error)) (*corev1.ConfigMap, *rollout.Record, error) {
	a := w.a
	var rec *rollout.Record
	res, err := a.cfg.Record.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		r, changed, err := rollout.Apply(cm, change)
		rec = r
		return changed, err
	})
	if err != nil {
		return nil, nil, err
	}
	if !res.Changed {
		return nil, rec, nil
	}
	if !older(res.New, a.view.Rollout) {
		a.view.Rollout = res.New
	}
	return res.New, rec, nil
}

// clock is who acts, and when, on the server's clock.
func (w *rollouts) clock() rollout.Clock {
	return rollout.Clock{Now: w.a.cfg.Clock.Now(), By: w.a.cfg.Identity}
}
