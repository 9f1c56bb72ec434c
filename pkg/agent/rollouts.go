package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// rollouts is the work a configuration rollout asks of the node: report a
// damaged record, expire a try, put kubeadm-config back for a revert, and
// take the node's turn or resume it.
type rollouts struct {
	damagedRV   string // the damaged record version already reported
	lastTurnErr string // why the node's turn was last deferred
	refused     int    // writes the API refused in a row: they are retried with a backoff
}

// TryExpiryMargin is how long after a try's deadline, on its own API
// server's clock, an agent reverts it. The deadline was stamped with the
// clock of the API server the last node's agent talked to; an HA control
// plane has one clock per API server, so a skew of up to the margin between
// them never reverts a try early.
const TryExpiryMargin = 5 * time.Second

// do does what the record as last seen asks of this agent, and says when
// to look again: when a try is due to expire before the next resync, or,
// after a write the API refused, with a backoff that doubles up to the
// resync period.
func (w *rollouts) do(ctx context.Context, e *env) time.Duration {
	if e.view.Rollout == nil {
		return 0
	}
	r, err := rollout.FromConfigMap(e.view.Rollout)
	if err != nil {
		w.damaged(ctx, e, err)
		return 0
	}
	w.damagedRV = ""
	s := r.Status
	if s == nil || !s.Phase.Active() {
		return 0
	}
	defer e.log.within(scope{rollout: s.ID})()
	if !e.holds() {
		return w.backoff(e)
	}
	if s.TryExpired(e.cfg.Clock.Now().Add(-TryExpiryMargin)) {
		if !w.expireTry(ctx, e) {
			return w.backoff(e)
		}
		w.refused = 0
		return 0 // the revert comes back through the watch
	}
	restored := true
	if s.Kind == rollout.KindRevert && !s.DocumentRestored {
		restored = w.restoreDocument(ctx, e, r)
	}
	w.nodeWork(ctx, e, r)
	if !restored {
		return w.backoff(e)
	}
	w.refused = 0
	return w.untilExpiry(e)
}

// nodeWork takes the node's turn, or resumes it.
func (w *rollouts) nodeWork(ctx context.Context, e *env, r *rollout.Record) {
	s := r.Status
	entry, ok := s.Lookup(e.cfg.Name)
	switch {
	case !ok || e.view.Config == nil:
	case entry.Phase == rollout.NodeInProgress:
		// This agent holds the node's Lease, so no other agent of the node
		// is alive: the entry is a turn an earlier agent did not finish.
		w.resume(ctx, e, r, entry)
	default:
		if turn, ok := s.Turn(); ok && turn == e.cfg.Name {
			w.turn(ctx, e, r)
		}
	}
}

// backoff is the wait before trying again after the API refused a write:
// one second, doubling with each refusal in a row, up to Resync.
func (w *rollouts) backoff(e *env) time.Duration {
	w.refused++
	return min(time.Second<<min(w.refused-1, 10), e.cfg.Resync)
}

// untilExpiry is the time until the try of the rollout as last seen runs
// out (with TryExpiryMargin and a second), at least 100ms; 0 when none
// runs or it ran out already (it was expired, or a backoff is due).
func (w *rollouts) untilExpiry(e *env) time.Duration {
	if e.view.Rollout == nil {
		return 0
	}
	r, err := rollout.FromConfigMap(e.view.Rollout)
	if err != nil || r.Status == nil || r.Status.Phase != rollout.AwaitingConfirm || r.Status.Try == nil {
		return 0
	}
	until := r.Status.Try.Deadline.Add(TryExpiryMargin).Sub(e.cfg.Clock.Now()) + time.Second
	if until <= 0 {
		return 0
	}
	return max(until, 100*time.Millisecond)
}

// damaged reports a record no agent may act on, once per version of it:
// nothing on the node is touched until it is fixed or deleted.
func (w *rollouts) damaged(ctx context.Context, e *env, err error) {
	if e.view.Rollout.ResourceVersion == w.damagedRV {
		return
	}
	w.damagedRV = e.view.Rollout.ResourceVersion
	msg := exitcode.Message(err) + "; this agent changes nothing on node " + e.cfg.Name + " until it is"
	if !errors.As(err, new(*rollout.DamagedError)) {
		msg = "cannot read the rollout record: " + msg
	}
	e.log.event(ctx, e.view.Rollout, true, "RecordDamaged", msg)
}

// update changes the record with a compare-and-swap and returns the
// ConfigMap written (nil when change had nothing to change) and the record
// as change left it. The copy written becomes the record as last seen: it
// is the newest the agent knows of, and a change of kubeadm-config that
// arrives before the watch's copy of it must not have the agent act on an
// older one (take a turn it has just finished, say).
func (w *rollouts) update(ctx context.Context, e *env, change func(r *rollout.Record) (bool, error)) (*corev1.ConfigMap, *rollout.Record, error) {
	var rec *rollout.Record
	res, err := e.cfg.Record.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
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
	if !older(res.New, e.view.Rollout) {
		e.view.Rollout = res.New
	}
	return res.New, rec, nil
}

// updateOwn changes this node's entry in the record, and nothing else of
// the record's nodes, with a compare-and-swap (as update): change gets the
// record, the agent's own node and the clock to pass to the transition. A
// change that would touch another node's entry is refused and nothing is
// written: an agent answers for its own node only, whatever a bug in it
// or in the record asks.
func (w *rollouts) updateOwn(ctx context.Context, e *env, change func(r *rollout.Record, node string, c rollout.Clock) error) (*corev1.ConfigMap, *rollout.Record, error) {
	node := e.cfg.Name
	return w.update(ctx, e, func(r *rollout.Record) (bool, error) {
		others := otherEntries(r.Status, node)
		if err := change(r, node, w.clock(e)); err != nil {
			return false, err
		}
		if after := otherEntries(r.Status, node); !reflect.DeepEqual(others, after) {
			return false, exitcode.New(exitcode.Internal, fmt.Errorf("refusing to write the rollout record: the change of node %s's entry would also change another node's; an agent writes its own node's entry only", node))
		}
		return true, nil
	})
}

// otherEntries are the entries of the rollout s for nodes other than node.
func otherEntries(s *rollout.Status, node string) map[string]rollout.Node {
	out := map[string]rollout.Node{}
	if s == nil {
		return out
	}
	for _, n := range s.Nodes {
		if n.Name != node {
			out[n.Name] = n
		}
	}
	return out
}

// clock is who acts, and when, on the server's clock.
func (w *rollouts) clock(e *env) rollout.Clock {
	return rollout.Clock{Now: e.cfg.Clock.Now(), By: e.cfg.Identity}
}
