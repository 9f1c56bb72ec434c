package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/crash"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// What the agent does with the record it sees: report damage, expire a
// try, put kubeadm-config back for a revert, and take its node's turn or
// resume it.

// act does what the record as last seen asks of this agent. Every change
// goes through a compare-and-swap of the record, so an agent acting on a
// stale copy is refused and acts again on the next one.
func (a *Agent) act(ctx context.Context) {
	if a.record == nil {
		return
	}
	r, err := FromConfigMap(a.record)
	if err != nil {
		a.damaged(ctx, err)
		return
	}
	a.damagedRV = ""
	s := r.Status
	if s == nil {
		return
	}
	if s.TryExpired(a.cfg.Clock.Now()) {
		a.expireTry(ctx)
		return // the revert comes back through the watch
	}
	if s.Kind == KindRevert && s.Phase.Active() && !s.DocumentRestored {
		a.restoreDocument(ctx, r)
	}
	node := a.cfg.Node.Name
	entry, ok := s.Lookup(node)
	switch {
	case !ok || !s.Phase.Active() || a.live == nil:
		return
	case entry.Phase == NodeInProgress:
		// This agent holds the node's Lease, so no other agent of the node
		// is alive: the entry is a turn an earlier agent did not finish.
		a.resume(ctx, r, entry)
	default:
		if turn, ok := s.Turn(); ok && turn == node {
			a.turn(ctx, r)
		}
	}
}

// damaged reports a record no agent may act on, once per version of it:
// nothing on the node is touched until it is fixed or deleted.
func (a *Agent) damaged(ctx context.Context, err error) {
	if a.record.ResourceVersion == a.damagedRV {
		return
	}
	a.damagedRV = a.record.ResourceVersion
	msg := exitcode.Message(err) + "; this agent changes nothing on node " + a.cfg.Node.Name + " until it is"
	if !errors.As(err, new(*DamagedError)) {
		msg = "cannot read the rollout record: " + msg
	}
	a.event(ctx, a.record, true, "RecordDamaged", msg)
}

// turn takes the node's turn: it renders the pinned target, plans, records
// the start with the plan (BeginNode, from inside the run so that the
// record names the plan actually applied), applies, and records the
// outcome.
func (a *Agent) turn(ctx context.Context, r *Record) {
	s := r.Status
	actx, done := a.applyContext(ctx)
	defer done()
	begun := false
	rep, err := reconfigure.Run(actx, a.request(r, func(components []string, backup string) error {
		cm, _, err := a.update(actx, func(r *Record) (bool, error) {
			return true, r.BeginNode(a.clock(), s.ID, a.cfg.Node.Name, components, backup)
		})
		if err != nil {
			return err
		}
		begun = true
		what := "nothing to change"
		if len(components) > 0 {
			what = "changing " + strings.Join(components, ", ")
		}
		a.event(ctx, cm, false, "NodeStarted", fmt.Sprintf("node %s started its turn in %s %d: %s", a.cfg.Node.Name, s.Kind, s.ID, what))
		return nil
	}))
	if !begun {
		a.notBegun(ctx, s, err)
		return
	}
	a.lastTurnErr = ""
	a.finish(ctx, s.ID, outcomeOf(rep, err), err)
}

// notBegun handles a turn that stopped before the node changed. A
// refusal of the document or the node's manifests, a change of versions
// (kubeadm upgrade's work), or an etcd member that may not be changed
// (the cluster fails the checks, no client certificate, no snapshot) ends
// the turn (the node fails, unchanged, and the rollout with it); anything
// else may pass (the manifests directory busy, another etcd member being
// changed, the API unreachable, an upgrade in progress, the turn taken
// back) and is tried again on the next change or resync.
func (a *Agent) notBegun(ctx context.Context, s *Status, err error) {
	if !endsTurn(err) {
		if msg := exitcode.Message(err); msg != a.lastTurnErr {
			a.lastTurnErr = msg
			a.logErr(err, true, "TurnDeferred", fmt.Sprintf("node %s cannot take its turn in %s %d yet: %s; trying again on the next change or within %s",
				a.cfg.Node.Name, s.Kind, s.ID, msg, a.cfg.Resync))
		}
		return
	}
	o := Outcome{Phase: NodeRolledBack, Message: exitcode.Message(err) + "; nothing was changed on the node"}
	cm, _, uerr := a.update(context.WithoutCancel(ctx), func(r *Record) (bool, error) {
		c := a.clock()
		if err := r.BeginNode(c, s.ID, a.cfg.Node.Name, nil, ""); err != nil {
			return false, err
		}
		return true, r.FinishNode(c, s.ID, a.cfg.Node.Name, o)
	})
	if uerr != nil {
		a.log(true, "TurnDeferred", "node %s failed its turn in %s %d (%s), and that could not be recorded: %s",
			a.cfg.Node.Name, s.Kind, s.ID, o.Message, exitcode.Message(uerr))
		return
	}
	a.event(ctx, cm, false, "NodeStarted", fmt.Sprintf("node %s started its turn in %s %d", a.cfg.Node.Name, s.Kind, s.ID))
	a.eventErr(ctx, cm, err, true, string("Node"+NodeRolledBack), fmt.Sprintf("node %s failed before changing anything: %s", a.cfg.Node.Name, o.Message))
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

// outcomeOf is how a run that began ended: Updated or Unchanged when it
// went well; RolledBack when it failed and the node is back on what it ran
// (reconfigure's exit code 8, or a failure before anything was replaced);
// RollbackFailed when the rollback failed too (exit code 9).
func outcomeOf(rep *reconfigure.Report, err error) Outcome {
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
		return Outcome{Phase: NodeUpdated, Components: replaced, Message: warnings(rep)}
	case err == nil:
		return Outcome{Phase: NodeUnchanged, Message: warnings(rep)}
	case exitcode.FromError(err) == exitcode.RollbackFailed:
		return Outcome{Phase: NodeRollbackFailed, Components: replaced, Message: exitcode.Message(err)}
	case exitcode.FromError(err) == exitcode.RolledBack:
		return Outcome{Phase: NodeRolledBack, Components: replaced, Message: exitcode.Message(err)}
	}
	// Apply returns other errors only before its first replace.
	return Outcome{Phase: NodeRolledBack, Message: exitcode.Message(err) + "; nothing was changed on the node"}
}

func warnings(rep *reconfigure.Report) string {
	var ws []string
	for _, w := range rep.Warnings {
		ws = append(ws, "warning: "+exitcode.Message(w))
	}
	return strings.Join(ws, "; ")
}

// finish records the outcome of the node's turn. It is written whatever
// happened to ctx: an agent that was told to stop still reports how the
// node ended.
func (a *Agent) finish(ctx context.Context, id int64, o Outcome, cause error) {
	wctx := context.WithoutCancel(ctx)
	cm, _, err := a.update(wctx, func(r *Record) (bool, error) {
		return true, r.FinishNode(a.clock(), id, a.cfg.Node.Name, o)
	})
	if err != nil {
		a.log(true, "FinishFailed", "node %s ended %s, but the record could not say so: %s; the node is resumed and its outcome written on the next change or resync",
			a.cfg.Node.Name, o.Phase, exitcode.Message(err))
		return
	}
	what := fmt.Sprintf("node %s is %s", a.cfg.Node.Name, o.Phase)
	if len(o.Components) > 0 {
		what += " (" + strings.Join(o.Components, ", ") + ")"
	}
	if o.Message != "" {
		what += ": " + o.Message
	}
	a.eventErr(wctx, cm, cause, !o.Phase.Done(), "Node"+string(o.Phase), what)
	a.refreshState(wctx, true)
}

// request is the reconfiguration of the node to the record's pinned
// target, as the reconfigure verb would run it.
func (a *Agent) request(r *Record, begin func([]string, string) error) reconfigure.Request {
	return reconfigure.Request{
		Config: a.cfg.Config, Store: a.cfg.Store, Keep: a.cfg.Keep, Server: a.cfg.Server,
		Source: reconfigure.Source{Pinned: a.pinned(r)}, Node: a.cfg.Node,
		ManifestsDir: a.cfg.ManifestsDir, Kubeadm: a.cfg.Kubeadm, Wait: a.cfg.Wait, UpgradeConfigMap: a.cfg.UpgradeConfigMap,
		CertificatesDir: a.cfg.CertificatesDir, NoEtcdSnapshot: a.cfg.NoEtcdSnapshot, Identity: a.cfg.Identity, Now: a.cfg.Clock.Now,
		Progress: a.progress, Begin: begin,
	}
}

// pinned is the record's target as a copy of kubeadm-config: the document
// it pinned, the resourceVersion it was pinned from, and the ConfigMap's
// uid (backups tie the document to its cluster by it).
func (a *Agent) pinned(r *Record) *corev1.ConfigMap {
	t := a.cfg.Config.Target()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name, ResourceVersion: r.Status.Target.ResourceVersion},
		Data:       map[string]string{t.Key: string(r.Target)},
	}
	if a.live != nil {
		cm.UID = a.live.UID
	}
	return cm
}

// progress logs the steps of a reconfiguration that matter: not every
// look at a component.
func (a *Agent) progress(e reconfigure.Event) {
	switch e.Kind {
	case reconfigure.EventWarning:
		a.log(true, "Reconfigure", "%s", e.Message)
	case reconfigure.EventRendering:
		a.log(false, "Reconfigure", "%s", e.Message)
	case reconfigure.EventEtcd:
		a.log(false, "Reconfigure", "etcd: %s", e.Message)
	case reconfigure.EventComponent:
		c := e.Component
		switch c.Kind {
		case controlplane.EventReplacing, controlplane.EventHealthy, controlplane.EventFailed,
			controlplane.EventRollingBack, controlplane.EventRolledBack:
			msg := fmt.Sprintf("%s: %s", c.Component.PodName(), c.Kind)
			if c.Message != "" {
				msg += ": " + c.Message
			}
			if c.Elapsed > 0 {
				msg += fmt.Sprintf(" (%s)", c.Elapsed.Round(100*time.Millisecond))
			}
			a.log(c.Kind == controlplane.EventFailed, "Reconfigure", "%s", msg)
		}
	}
}

// applyContext is the context of a node's turn: it ends StopGrace after
// ctx does, so that an agent told to stop gives the turn that long to
// finish before interrupting it (and so rolling it back).
func (a *Agent) applyContext(ctx context.Context) (context.Context, func()) {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	finished := make(chan struct{})
	watching := crash.Go(func() error {
		select {
		case <-finished:
			return nil
		case <-ctx.Done():
		}
		a.log(true, "Stopping", "told to stop during node %s's turn: it has %s to finish before it is interrupted and rolled back",
			a.cfg.Node.Name, a.cfg.StopGrace)
		select {
		case <-finished:
		case <-time.After(a.cfg.StopGrace):
			cancel()
		}
		return nil
	})
	return actx, func() {
		close(finished)
		if err := <-watching; err != nil {
			a.log(true, "InternalError", "%s", exitcode.Message(err))
		}
		cancel()
	}
}

// update changes the record with a compare-and-swap and returns the
// ConfigMap written (nil when change had nothing to change) and the record
// as change left it. The copy written becomes the record as last seen: it
// is the newest the agent knows of, and a change of kubeadm-config that
// arrives before the watch's copy of it must not have the agent act on an
// older one (take a turn it has just finished, say).
func (a *Agent) update(ctx context.Context, change func(r *Record) (bool, error)) (*corev1.ConfigMap, *Record, error) {
	var rec *Record
	res, err := a.cfg.Record.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		r, changed, err := Apply(cm, change)
		rec = r
		return changed, err
	})
	if err != nil {
		return nil, nil, err
	}
	if !res.Changed {
		return nil, rec, nil
	}
	if !older(res.New, a.record) {
		a.record = res.New
	}
	return res.New, rec, nil
}

// event logs what happened and records it as an Event on cm (the record),
// best effort: a failure to record it is a warning.
func (a *Agent) event(ctx context.Context, cm *corev1.ConfigMap, warning bool, reason, message string) {
	a.eventErr(ctx, cm, nil, warning, reason, message)
}

// eventErr is event, for an event caused by err.
func (a *Agent) eventErr(ctx context.Context, cm *corev1.ConfigMap, err error, warning bool, reason, message string) {
	a.logErr(err, warning, reason, message)
	if cm == nil {
		return
	}
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	if err := a.cfg.Record.Event(context.WithoutCancel(ctx), cm, eventType, reason, message); err != nil {
		a.log(true, "EventFailed", "the %s Event could not be recorded: %s", reason, exitcode.Message(err))
	}
}
