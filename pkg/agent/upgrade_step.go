package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/proc"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/kubeadmupgrade"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// step takes the node's step in the upgrade: its control plane's kubeadm
// upgrade, or its kubelet. It turns the record into a request, begins the
// run (or takes the earlier agent's over) with the phase it starts at,
// has pkg/kubeadmupgrade carry it out, recording each phase as it starts,
// and records the outcome.
func (w *upgrades) step(ctx context.Context, e *env, rec *upgradestate.Record, turn upgradestate.Turn) error {
	req, err := w.request(ctx, e, rec, turn)
	if err != nil {
		w.wait(e, "node %s waits to run %s: %s", e.cfg.Name, turn.Step, exitcode.Message(err))
		return err
	}
	step, host := string(turn.Step), ""
	if req.Kind == kubeadmupgrade.KubeletStep {
		step, host = string(turn.Host), e.cfg.Name
	}
	rn, err := w.begin(ctx, e, step, host, turn.Lost, req.StartPhase)
	if err != nil {
		return err
	}
	e.log.info("UpgradeStep", "node %s runs %s (%s %s), from phase %s", e.cfg.Name, rn.State, req.Kind, req.Version, req.StartPhase)
	e.job(ctx, func(jctx, wctx context.Context) {
		hb := w.heartbeat(wctx, e, rn)
		defer func() {
			if hb != nil {
				hb.Stop()
			}
		}()
		req.Phase = func(phase string) error { return w.recordPhase(wctx, e, rn, phase) }
		req.Started = func(id proc.Identity) { w.recordProcess(wctx, e, rn.ID, id) }
		_, err := kubeadmupgrade.Run(jctx, kubeadmupgrade.Node{Node: e.cfg.Node, Env: e.cfg.Upgrades}, req)
		w.end(wctx, ctx.Done(), e, rn, req, err)
	})
	w.waiting = ""
	return nil
}

// request is the node's step as the record asks for it: of which kind,
// from which phase, and whether the first node's point of no return is
// past (kubeadm-config says the target).
func (w *upgrades) request(ctx context.Context, e *env, rec *upgradestate.Record, turn upgradestate.Turn) (kubeadmupgrade.Request, error) {
	req := kubeadmupgrade.Request{Kind: kubeadmupgrade.Upgrade, Version: rec.ToVersion, From: rec.FromVersion,
		Wait: e.cfg.Wait, Progress: e.upgradeProgress}
	switch {
	case turn.Kind == upgradestate.TurnKubelet:
		req.Kind = kubeadmupgrade.KubeletStep
	case turn.Apply:
		req.Kind = kubeadmupgrade.Apply
	}
	if req.Kind != kubeadmupgrade.KubeletStep {
		noReturn, err := kubeadmupgrade.DocumentSays(ctx, e.cfg.Config, req.Version)
		if err != nil {
			return req, err
		}
		req.NoReturn = noReturn
	}
	req.StartPhase = kubeadmupgrade.Phases(req.Kind)[0]
	// A step run again (a resume, an earlier agent's step taken over)
	// starts at the phase it stopped in; a first node that was put back
	// starts over, and one whose kubeadm-config says the target although
	// its manifests do not (put back after a write whose answer was lost)
	// at the control-plane phase.
	if (turn.Retry || turn.Lost != nil) && (req.Kind != kubeadmupgrade.Apply || req.NoReturn) {
		for _, n := range rec.Agents.Nodes {
			if n.Node == e.cfg.Name {
				req.StartPhase = kubeadmupgrade.ResumePhase(kubeadmupgrade.Node{Node: e.cfg.Node, Env: e.cfg.Upgrades}, req.Kind, n.Phase, req.Version)
			}
		}
	}
	return req, nil
}

// begin moves the upgrade (or, with host, the node) into step as this
// agent's run, or takes over the run of an earlier agent of the node
// (lost), in one write with the phase it starts at.
func (w *upgrades) begin(ctx context.Context, e *env, step, host string, lost *upgradestate.Runner, phase string) (upgradestate.Runner, error) {
	run := upgradestate.Run{ID: e.cfg.Identity, Step: step, Host: host, Interval: heartbeatInterval,
		Command: "kubeadm upgrade (agent " + e.cfg.Identity + ")", Leases: e.cfg.Upgrade.HeartbeatNames(), Check: upgradestate.CheckProcess}
	var rn upgradestate.Runner
	cm, err := w.update(ctx, e, func(rec *upgradestate.Record) (bool, error) {
		var err error
		if lost != nil {
			rn, err = rec.TakeOver(w.clock(e), lost.ID, run)
		} else {
			rn, err = rec.BeginRun(w.clock(e), run)
		}
		if err != nil {
			return false, err
		}
		rec.Agents.BeginPhase(w.clock(e), e.cfg.Name, step, phase)
		return true, nil
	})
	if err != nil {
		var live *upgradestate.LiveCommandError
		if errors.As(err, &live) {
			w.wait(e, "node %s waits for the kubeadm an earlier agent started (pid %d) to end before it runs %s again", e.cfg.Name, live.Runner.PID, step)
		} else {
			w.wait(e, "node %s cannot begin %s yet: %s", e.cfg.Name, step, exitcode.Message(err))
		}
		return rn, err
	}
	e.log.inPhase(phase)
	what := "begins"
	switch {
	case lost != nil && lost.ID == e.cfg.Identity:
		what = "picks up its own run of" // its beginning was recorded, unseen
	case lost != nil:
		what = "takes over from " + lost.ID
	}
	e.log.upgradeEvent(ctx, cm, false, "UpgradeStepStarted", fmt.Sprintf("node %s %s %s, from phase %s", e.cfg.Name, what, step, phase))
	return rn, nil
}

// recordPhase records that the node runs phase of rn's step now.
func (w *upgrades) recordPhase(ctx context.Context, e *env, rn upgradestate.Runner, phase string) error {
	// What follows is this phase's, a failure to record it included.
	e.log.inPhase(phase)
	_, err := w.update(ctx, e, func(rec *upgradestate.Record) (bool, error) {
		if rec.RunnerByID(rn.ID) == nil {
			return false, exitcode.Conflictf("the step is no longer this agent's: someone moved it (the upgrade is in %s)", rec.State)
		}
		rec.Agents.BeginPhase(w.clock(e), e.cfg.Name, rn.State, phase)
		return true, nil
	})
	if err == nil {
		e.log.info("UpgradePhase", "node %s: %s: phase %s", e.cfg.Name, rn.State, phase)
	}
	return err
}

// recordProcess records a child the step started in the run id's runner,
// so that a later agent of the node knows whether it still runs.
func (w *upgrades) recordProcess(ctx context.Context, e *env, id string, p proc.Identity) {
	rp := upgradestate.ProcessOf(p)
	if _, err := w.update(ctx, e, func(rec *upgradestate.Record) (bool, error) { return rec.RecordProcess(id, rp) }); err != nil {
		e.log.warn("UpgradeNotRecorded", "could not record the pid %d of a command of the step: %s", p.PID, exitcode.Message(err))
	}
}

// stepOutcome is how the node ended its step, and the reason recorded:
// Done; RolledBack when it failed and is back on what it ran; Failed when
// it stays as the failure left it (past the point of no return, or its
// kubelet), for upgrade-resume; RollbackFailed when it could not be put
// back, or not wholly (its etcd member stays on the new release).
func stepOutcome(node, step string, req kubeadmupgrade.Request, err error) (outcome, reason string) {
	var putBack *kubeadmupgrade.PutBackError
	var failed *kubeadmupgrade.PhaseError
	switch {
	case err == nil && req.Kind == kubeadmupgrade.KubeletStep:
		return upgradestate.NodeDone, fmt.Sprintf("upgrade-apply: node %s's kubelet runs %s", node, req.Version)
	case err == nil:
		return upgradestate.NodeDone, fmt.Sprintf("upgrade-apply: node %s runs %s", node, req.Version)
	case errors.As(err, &putBack) && putBack.Untried:
		f := putBack.Failure
		why := exitcode.Message(f.Err) + "; not put back on " + req.From + ": " + exitcode.Message(putBack.Err)
		return upgradestate.NodeRollbackFailed, upgradestate.PhaseFailure(node, step, f.Phase, why, f.Output)
	case errors.As(err, &putBack):
		f := putBack.Failure
		why := exitcode.Message(f.Err) + "; putting the node back on " + req.From + " failed: " + exitcode.Message(putBack.Err)
		return upgradestate.NodeRollbackFailed, upgradestate.PhaseFailure(node, step, f.Phase, why, f.Output)
	case errors.As(err, &failed) && failed.Unchanged:
		why := exitcode.Message(failed.Err) + "; the step changed nothing on the node"
		return upgradestate.NodeRolledBack, upgradestate.PhaseFailure(node, step, failed.Phase, why, failed.Output)
	case errors.As(err, &failed) && failed.Back && failed.EtcdKept != "":
		// Not the node it was: RolledBack (exit 8) would say the cluster is
		// as it was.
		why := exitcode.Message(failed.Err) + "; the node's other components are back on " + req.From + ", but " + failed.EtcdKept
		return upgradestate.NodeRollbackFailed, upgradestate.PhaseFailure(node, step, failed.Phase, why, failed.Output)
	case errors.As(err, &failed) && failed.Back:
		why := exitcode.Message(failed.Err) + "; the node is back on " + req.From
		return upgradestate.NodeRolledBack, upgradestate.PhaseFailure(node, step, failed.Phase, why, failed.Output)
	case errors.As(err, &failed):
		return upgradestate.NodeFailed, upgradestate.PhaseFailure(node, step, failed.Phase, exitcode.Message(failed.Err), failed.Output)
	}
	return upgradestate.NodeFailed, upgradestate.PhaseFailure(node, step, req.StartPhase, exitcode.Message(err), "")
}
