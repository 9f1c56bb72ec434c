package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// A node's turn in a rollout: render the pinned target, plan, record the
// start with the plan, apply, record the outcome.

// turn takes the node's turn: it renders the pinned target, plans, records
// the start with the plan (BeginNode, from inside the run so that the
// record names the plan actually applied), applies, and records the
// outcome.
func (w *rollouts) turn(ctx context.Context, e *env, r *rollout.Record) {
	s := r.Status
	e.job(ctx, func(jctx, wctx context.Context) {
		begun := false
		rep, err := reconfigure.Run(jctx, e.nodeFor(r.Target), w.request(e, r, func(components []string, backup string) error {
			if !e.holds() {
				return errNotHeld
			}
			cm, _, err := w.updateOwn(jctx, e, func(r *rollout.Record, node string, c rollout.Clock) error {
				return r.BeginNode(c, s.ID, node, components, backup)
			})
			if err != nil {
				return err
			}
			begun = true
			what := "nothing to change"
			if len(components) > 0 {
				what = "changing " + strings.Join(components, ", ")
			}
			e.log.event(wctx, cm, false, "NodeStarted", fmt.Sprintf("node %s started its turn in %s %d: %s", e.cfg.Name, s.Kind, s.ID, what))
			return nil
		}))
		if !begun {
			w.notBegun(wctx, e, s, err)
			return
		}
		w.lastTurnErr = ""
		w.finish(wctx, e, s.ID, outcomeOf(rep, err), err)
	})
}

// notBegun handles a turn that stopped before the node changed. A
// refusal of the document or the node's manifests, a change of versions
// (kubeadm upgrade's work), or an etcd member that may not be changed
// (the cluster fails the checks, no client certificate, no snapshot) ends
// the turn (the node fails, unchanged, and the rollout with it); anything
// else may pass (the manifests directory busy, another etcd member being
// changed, the API unreachable, an upgrade in progress, the turn taken
// back) and is tried again on the next change or resync.
func (w *rollouts) notBegun(ctx context.Context, e *env, s *rollout.Status, err error) {
	if !endsTurn(err) {
		w.deferred(e, err, "node %s cannot take its turn in %s %d yet: %s", e.cfg.Name, s.Kind, s.ID)
		return
	}
	o := rollout.Outcome{Phase: rollout.NodeRolledBack, Message: exitcode.Message(err) + "; nothing was changed on the node"}
	cm, _, uerr := w.updateOwn(ctx, e, func(r *rollout.Record, node string, c rollout.Clock) error {
		if err := r.BeginNode(c, s.ID, node, nil, ""); err != nil {
			return err
		}
		return r.FinishNode(c, s.ID, node, o)
	})
	if uerr != nil {
		e.log.warn("TurnDeferred", "node %s failed its turn in %s %d (%s), and that could not be recorded: %s",
			e.cfg.Name, s.Kind, s.ID, o.Message, exitcode.Message(uerr))
		return
	}
	e.log.event(ctx, cm, false, "NodeStarted", fmt.Sprintf("node %s started its turn in %s %d", e.cfg.Name, s.Kind, s.ID))
	e.log.eventErr(ctx, cm, err, true, string("Node"+rollout.NodeRolledBack), fmt.Sprintf("node %s failed before changing anything: %s", e.cfg.Name, o.Message))
}

// errNotHeld stops a node's work before it begins: the agent cannot show
// that it holds its node's Lease (Agent.holds says why, once).
var errNotHeld = errors.New("this agent cannot show that it holds its node's lease")

// deferred logs, once per distinct reason, that the node's work waits:
// format takes the arguments given and then err's message.
func (w *rollouts) deferred(e *env, err error, format string, args ...any) {
	msg := exitcode.Message(err)
	if msg == w.lastTurnErr {
		return
	}
	w.lastTurnErr = msg
	e.log.logErr(err, true, "TurnDeferred", fmt.Sprintf(format, append(args, msg)...)+
		fmt.Sprintf("; trying again on the next change or within %s", e.cfg.Resync))
}

// endsTurn reports whether a run that stopped before the node changed
// fails the node (see notBegun), rather than being tried again.
func endsTurn(err error) bool {
	var stage *reconfigure.StageError
	var kubeadm *controlplane.KubeadmError
	var busy *reconfigure.EtcdBusyError
	if exitcode.FromError(err) == exitcode.Invalid {
		return true
	}
	if !errors.As(err, &stage) {
		return false
	}
	switch stage.Stage {
	case reconfigure.StagePlan, reconfigure.StageDiscover, reconfigure.StageVersion:
		return true
	case reconfigure.StageRender:
		return errors.As(err, &kubeadm)
	case reconfigure.StageEtcd:
		return !errors.As(err, &busy) && !errors.Is(err, engine.ErrUnreachable)
	}
	return false
}

// outcomeOf is how a run that began ended, from what it returned:
// Updated or Unchanged when it went well; RollbackFailed when a component
// did not come back on its previous manifest (a controlplane.RollbackError);
// RolledBack when it failed and the node is back on what it ran (a
// controlplane.FailedError, or any failure before anything was replaced).
func outcomeOf(rep *reconfigure.Report, err error) rollout.Outcome {
	var replaced []string
	if rep != nil {
		for _, o := range rep.Outcomes {
			if o.Replaced {
				replaced = append(replaced, o.Component.PodName())
			}
		}
	}
	switch {
	case err == nil && len(replaced) > 0:
		return rollout.Outcome{Phase: rollout.NodeUpdated, Components: replaced, Message: warnings(rep)}
	case err == nil:
		return rollout.Outcome{Phase: rollout.NodeUnchanged, Message: warnings(rep)}
	case errors.As(err, new(*controlplane.RollbackError)):
		return rollout.Outcome{Phase: rollout.NodeRollbackFailed, Components: replaced, Message: exitcode.Message(err)}
	case errors.As(err, new(*controlplane.FailedError)):
		return rollout.Outcome{Phase: rollout.NodeRolledBack, Components: replaced, Message: exitcode.Message(err)}
	}
	// Apply returns other errors only before its first replace.
	return rollout.Outcome{Phase: rollout.NodeRolledBack, Message: exitcode.Message(err) + "; nothing was changed on the node"}
}

func warnings(rep *reconfigure.Report) string {
	var ws []string
	for _, w := range rep.Warnings {
		ws = append(ws, "warning: "+exitcode.Message(w))
	}
	return strings.Join(ws, "; ")
}

// finish records the outcome of the node's turn; ctx is one that outlives
// the turn (an agent that was told to stop still reports how the node
// ended).
func (w *rollouts) finish(ctx context.Context, e *env, id int64, o rollout.Outcome, cause error) {
	cm, _, err := w.updateOwn(ctx, e, func(r *rollout.Record, node string, c rollout.Clock) error {
		return r.FinishNode(c, id, node, o)
	})
	if err != nil {
		e.log.warn("FinishFailed", "node %s ended %s, but the record could not say so: %s; the node is resumed and its outcome written on the next change or resync",
			e.cfg.Name, o.Phase, exitcode.Message(err))
		return
	}
	what := fmt.Sprintf("node %s is %s", e.cfg.Name, o.Phase)
	if len(o.Components) > 0 {
		what += " (" + strings.Join(o.Components, ", ") + ")"
	}
	if o.Message != "" {
		what += ": " + o.Message
	}
	e.log.eventErr(ctx, cm, cause, !o.Phase.Done(), "Node"+string(o.Phase), what)
	e.stateChanged()
}

// request is the reconfiguration of the node to the record's pinned
// target, as the reconfigure verb would run it.
func (w *rollouts) request(e *env, r *rollout.Record, begin func([]string, string) error) reconfigure.Request {
	return reconfigure.Request{
		Source: reconfigure.Source{Pinned: w.pinned(e, r)}, Wait: e.cfg.Wait, NoEtcdSnapshot: e.cfg.NoEtcdSnapshot,
		Progress: e.progress, Begin: begin,
	}
}

// pinned is the record's target as a copy of kubeadm-config: the document
// it pinned, the resourceVersion it was pinned from, and the ConfigMap's
// uid (backups tie the document to its cluster by it).
func (w *rollouts) pinned(e *env, r *rollout.Record) *corev1.ConfigMap {
	t := e.cfg.Config.Target()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name, ResourceVersion: r.Status.Target.ResourceVersion},
		Data:       map[string]string{t.Key: string(r.Target)},
	}
	if e.view.Config != nil {
		cm.UID = e.view.Config.UID
	}
	return cm
}
