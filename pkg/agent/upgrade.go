package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// upgrades is the work an upgrade the agents carry out (upgrade-apply)
// asks of the node: its control plane's kubeadm upgrade, phase by phase,
// its kubelet (both carried out by pkg/kubeadmupgrade: upgrade_step.go),
// or, for the first node, the moves of the upgrade that are no node's
// work. Record.TurnOf decides; this work does what it says and records it,
// with a compare-and-swap of the upgrade record.
type upgrades struct {
	waiting string // why the node's turn waits, as last said
	refused int    // writes the API refused in a row
	// unrecorded is how this agent's last step ended when the record
	// could not be made to say so, even after outcomeRetry: it is written
	// on a later pass, when TurnOf hands the step back (nil: none).
	unrecorded *stepEnd
	// pause is the first wait before an outcome's write is tried again
	// (time.Second when zero), doubled after each try; within bounds the
	// tries (outcomeRetry when zero).
	pause, within time.Duration
}

// do takes the node's turn in the upgrade as last seen, if it has one.
func (w *upgrades) do(ctx context.Context, e *env) time.Duration {
	cm := e.view.Upgrade
	if cm == nil || e.cfg.Upgrade == nil {
		return 0
	}
	rec, ok, err := upgradestate.FromConfigMap(cm)
	if err != nil {
		e.log.warnOnce("UpgradeUnreadable", "", "the upgrade record %s cannot be read: %s; this agent takes no upgrade step until it can", e.cfg.Upgrade.Target(), exitcode.Message(err))
		return 0
	}
	if !ok || rec.Agents == nil {
		return 0
	}
	w.forget(e, rec)
	// This agent runs no step now: its steps run from its loop, one at a
	// time, so a step its own runner holds is one whose end it could not
	// record, and TurnOf hands it back.
	turn := rec.TurnOf(e.cfg.Name, "")
	if turn.Kind == upgradestate.TurnNone {
		return 0
	}
	step := string(turn.Step)
	if turn.Host != "" {
		step = string(turn.Host)
	}
	defer e.log.within(scope{upgrade: rec.ToVersion, step: step})()
	if !e.holds() {
		return w.backoff(e)
	}
	var werr error
	switch turn.Kind {
	case upgradestate.TurnStep, upgradestate.TurnKubelet:
		if o := w.unrecorded; o != nil && turn.Lost != nil && turn.Lost.ID == o.runner.ID {
			werr = w.recordLate(ctx, e, o)
			break
		}
		werr = w.step(ctx, e, rec, turn)
		if werr == nil && w.unrecorded != nil {
			return w.backoff(e)
		}
	case upgradestate.TurnEnter:
		werr = w.move(ctx, e, fmt.Sprintf("node %s enters %s: the kubelets go node by node", e.cfg.Name, turn.Step), func(rec *upgradestate.Record, c upgradestate.Clock) (bool, error) {
			return rec.Set(c, turn.Step, "", false, "upgrade-apply: the kubelets, node by node")
		})
	case upgradestate.TurnPass:
		werr = w.move(ctx, e, fmt.Sprintf("%s is no node's kubeadm work: recorded as passed", turn.Step), func(rec *upgradestate.Record, c upgradestate.Clock) (bool, error) {
			st := rec.PlanOf().StepOf(turn.Step)
			if _, err := rec.Set(c, st.Name, "", false, "upgrade-apply: no kubeadm work in this step"); err != nil {
				return false, err
			}
			return rec.Set(c, st.Reaches, "", false, "upgrade-apply: no kubeadm work in this step: recorded by the agents")
		})
	case upgradestate.TurnComplete:
		werr = w.move(ctx, e, fmt.Sprintf("every control-plane node runs %s: the upgrade is complete", rec.ToVersion), func(rec *upgradestate.Record, c upgradestate.Clock) (bool, error) {
			return rec.Set(c, rec.PlanOf().Complete, "", false, fmt.Sprintf("upgrade-apply: every control-plane node runs %s", rec.ToVersion))
		})
	}
	if werr != nil {
		return w.backoff(e)
	}
	w.refused = 0
	return 0
}

// move makes one transition of the upgrade, and says so.
func (w *upgrades) move(ctx context.Context, e *env, what string, change func(rec *upgradestate.Record, c upgradestate.Clock) (bool, error)) error {
	cm, err := w.update(ctx, e, func(rec *upgradestate.Record) (bool, error) { return change(rec, w.clock(e)) })
	if err != nil {
		e.log.warnOnce("UpgradeNotRecorded", "", "%s, but that could not be recorded: %s; trying again", what, exitcode.Message(err))
		return err
	}
	e.log.recovered("UpgradeNotRecorded", "")
	if cm != nil {
		e.log.upgradeEvent(ctx, cm, false, "UpgradeMoved", what)
	}
	return nil
}

// update changes the upgrade record with a compare-and-swap; the copy
// written becomes the one the agent acts on. It returns nil when change
// had nothing to change.
func (w *upgrades) update(ctx context.Context, e *env, change func(rec *upgradestate.Record) (bool, error)) (*corev1.ConfigMap, error) {
	res, err := e.cfg.Upgrade.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		c, err := upgradestate.Apply(cm, upgradestate.Existing(change))
		return c.Changed, err
	})
	if err != nil {
		return nil, err
	}
	if !res.Changed {
		return nil, nil
	}
	if !older(res.New, e.view.Upgrade) {
		e.view.Upgrade = res.New
	}
	return res.New, nil
}

// clock is who acts, and when, on the server's clock.
func (w *upgrades) clock(e *env) upgradestate.Clock {
	return upgradestate.Clock{Now: e.cfg.Clock.Now(), By: e.cfg.Identity}
}

// backoff is the wait before trying again after a refused write.
func (w *upgrades) backoff(e *env) time.Duration {
	w.refused++
	return min(time.Second<<min(w.refused-1, 10), e.cfg.Resync)
}

// wait says, once per distinct reason, why the node's turn waits.
func (w *upgrades) wait(e *env, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if msg == w.waiting {
		return
	}
	w.waiting = msg
	e.log.warn("UpgradeWaits", "%s", msg)
}

// heartbeat renews the run's heartbeat Lease while its step runs, so that
// upgrade-audit fails the step should this agent die; nil when the run has
// none (it could not take one), which is then audited by age.
func (w *upgrades) heartbeat(ctx context.Context, e *env, rn upgradestate.Runner) *engine.Heartbeat {
	if rn.Lease == "" {
		return nil
	}
	hb, err := e.cfg.Upgrade.StartHeartbeat(ctx, rn.Lease, rn.ID, heartbeatInterval, e.cfg.Clock.Now)
	if err != nil {
		e.log.warn("NoHeartbeat", "no heartbeat for %s (%s): upgrade-audit --stuck-after watches it instead", rn.State, exitcode.Message(err))
		_, _ = w.update(ctx, e, func(rec *upgradestate.Record) (bool, error) { return rec.DropHeartbeat(rn.ID) })
		return nil
	}
	return hb
}

// heartbeatInterval is how often a step's heartbeat is renewed, as
// upgrade-run renews its own.
const heartbeatInterval = 5 * time.Second
