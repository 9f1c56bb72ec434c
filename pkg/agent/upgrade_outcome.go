package agent

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// How a step's end reaches the record. The write is idempotent under the
// step's runner: EndRun ends exactly that run, and a write whose answer was
// lost is seen to have landed (the runner is gone and the node's progress
// says this outcome). So it is tried again while the API refuses it or does
// not answer, for up to outcomeRetry; past that, the agent keeps the outcome
// and writes it when a later pass finds the step still held by its run
// (Record.TurnOf hands it back), instead of leaving the step upgrading-*
// under a live agent that never reports.

// outcomeRetry is how long a step's outcome is tried again before it is
// left to a later pass: an API server's restart, a load balancer's failover
// or an etcd leader election are over well within it.
const outcomeRetry = 2 * time.Minute

// maxOutcomePause bounds the wait between two tries of an outcome.
const maxOutcomePause = 15 * time.Second

// stepEnd is how a run of a step ended, as the record is to say it.
type stepEnd struct {
	runner upgradestate.Runner
	ok     bool
	// outcome is the node's (upgradestate.NodeDone, ...), reason the
	// reason recorded with it.
	outcome, reason string
}

// apply records o in rec: the run's end and the node's outcome. It changes
// nothing when an earlier write of o landed.
func (o *stepEnd) apply(rec *upgradestate.Record, c upgradestate.Clock, node string) (bool, error) {
	if rec.RunnerByID(o.runner.ID) == nil && o.landed(rec, node) {
		return false, nil
	}
	if _, err := rec.EndRun(c, o.runner.ID, o.ok, o.reason); err != nil {
		return false, err
	}
	rec.Agents.EndNode(node, o.outcome, o.reason)
	return true, nil
}

// landed reports whether the node's progress in rec says o.
func (o *stepEnd) landed(rec *upgradestate.Record, node string) bool {
	p := rec.Agents.Progress(node)
	return p.Step == o.runner.State && p.Outcome == o.outcome && p.Message == upgradestate.BoundReason(o.reason)
}

// end records the step's outcome, as kubeadmupgrade.Run's error says it,
// trying again for up to outcomeRetry (w.within); no try starts once stop is closed
// (the agent was told to stop: the node's next agent takes the step over,
// and the stop keeps its bound). An outcome still not recorded is kept
// for a later pass (recordLate).
func (w *upgrades) end(ctx context.Context, stop <-chan struct{}, e *env, rn upgradestate.Runner, req kubeadmupgrade.Request, err error) {
	o := &stepEnd{runner: rn}
	o.outcome, o.reason = stepOutcome(e.cfg.Name, rn.State, req, err)
	o.ok = o.outcome == upgradestate.NodeDone
	within := w.within
	if within <= 0 {
		within = outcomeRetry
	}
	tries, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	pause := w.pause
	if pause <= 0 {
		pause = time.Second
	}
	for {
		cm, refused, err := w.writeOutcome(tries, e, o)
		switch {
		case err == nil:
			w.recorded(ctx, e, cm, o)
			return
		case refused:
			e.log.warn("UpgradeNotRecorded", "node %s: %s ended %s, but the record refuses to say so: %s", e.cfg.Name, rn.State, o.outcome, exitcode.Message(err))
			return
		}
		wait := time.NewTimer(pause)
		select {
		case <-stop:
		default:
			select {
			case <-wait.C:
				pause = min(2*pause, maxOutcomePause)
				continue
			case <-stop:
			case <-tries.Done():
				wait.Stop()
				w.unrecorded = o
				e.log.warnOnce("UpgradeNotRecorded", "", "node %s: %s ended %s, but the record could not say so within %s: %s; this agent tries again on its next passes",
					e.cfg.Name, rn.State, o.outcome, within, exitcode.Message(err))
				return
			}
		}
		wait.Stop()
		e.log.warn("UpgradeNotRecorded", "node %s: %s ended %s, but the record could not say so before this agent stopped: %s", e.cfg.Name, rn.State, o.outcome, exitcode.Message(err))
		return
	}
}

// recordLate writes the outcome of this agent's step that end could not
// record, now that TurnOf has handed the step back. It returns an error
// when the write should be tried again.
func (w *upgrades) recordLate(ctx context.Context, e *env, o *stepEnd) error {
	cm, refused, err := w.writeOutcome(ctx, e, o)
	switch {
	case refused:
		w.unrecorded = nil
		e.log.warn("UpgradeNotRecorded", "node %s: %s ended %s, but the record refuses to say so: %s", e.cfg.Name, o.runner.State, o.outcome, exitcode.Message(err))
		return nil
	case err != nil:
		e.log.warnOnce("UpgradeNotRecorded", "", "node %s: %s ended %s, but the record could not say so: %s; this agent tries again on its next passes", e.cfg.Name, o.runner.State, o.outcome, exitcode.Message(err))
		return err
	}
	w.unrecorded = nil
	w.recorded(ctx, e, cm, o)
	return nil
}

// writeOutcome makes one write of o. refused is true when the record
// itself refused it (the step is no longer this run's: someone moved it,
// and that decision stands), which no retry changes.
func (w *upgrades) writeOutcome(ctx context.Context, e *env, o *stepEnd) (cm *corev1.ConfigMap, refused bool, err error) {
	var rerr error
	cm, err = w.update(ctx, e, func(rec *upgradestate.Record) (bool, error) {
		changed, err := o.apply(rec, w.clock(e), e.cfg.Name)
		rerr = err
		return changed, err
	})
	return cm, err != nil && rerr != nil, err
}

// recorded says that the record now holds o; cm is the copy written (nil
// when an earlier write had landed).
func (w *upgrades) recorded(ctx context.Context, e *env, cm *corev1.ConfigMap, o *stepEnd) {
	e.log.recovered("UpgradeNotRecorded", "")
	if cm != nil {
		e.log.upgradeEvent(ctx, cm, !o.ok, "UpgradeStep"+o.outcome, o.reason)
	} else {
		e.log.info("UpgradeStep"+o.outcome, "%s", o.reason)
	}
	e.stateChanged()
}

// forget drops an outcome kept for a later pass once rec no longer has
// its run: an earlier write landed, or someone moved the step (the audit,
// upgrade-fail), and that decision stands.
func (w *upgrades) forget(e *env, rec *upgradestate.Record) {
	o := w.unrecorded
	if o == nil || rec.RunnerByID(o.runner.ID) != nil {
		return
	}
	w.unrecorded = nil
	if o.landed(rec, e.cfg.Name) {
		e.log.recovered("UpgradeNotRecorded", "")
		e.log.info("UpgradeStep"+o.outcome, "%s", o.reason)
		return
	}
	e.log.warn("UpgradeNotRecorded", "node %s: %s ended %s, but someone moved the step before this agent could record it (the upgrade is in %s): that stands", e.cfg.Name, o.runner.State, o.outcome, rec.State)
}
