package operator

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// Apply starts an upgrade the agents carry out, once Preflight passes: in
// one compare-and-swap write of the record (created when missing), the
// upgrade from kubeadm-config's kubernetesVersion to spec.Version in its
// plan's start state, with the plan instantiated for the control-plane
// nodes and the agents' part (Record.Agents) set, so that the agents take
// it from there. Of two starts that race, one wins; the other is refused
// (exit 4) naming the upgrade in progress. The preflight's look at the
// rollout record is repeated inside the write, right before each attempt:
// a rollout that became active since the preflight refuses the start (exit
// 4, nothing written). The two records are two objects, so a rollout that
// starts in the milliseconds between that look and the write is not seen;
// its turns then wait for the upgrade.
func (o *Upgrades) Apply(ctx context.Context, spec ApplySpec) (*UpgradeChange, error) {
	ap, err := o.Preflight(ctx, spec)
	if err != nil {
		return nil, err
	}
	return o.write(ctx, func(rec *upgrade.Record) (*upgrade.Record, bool, error) {
		c := o.clock()
		next, err := upgrade.Start(rec, ap.Plan, c, ap.From, spec.Version, upgrade.BoundReason(spec.Reason))
		if err != nil {
			return nil, false, err
		}
		active, err := o.activeRollout(ctx)
		if err != nil {
			return nil, false, err
		}
		if active != "" {
			return nil, false, exitcode.New(exitcode.Conflict, &PreflightError{Problems: []string{active + " (it started after the preflight)"}})
		}
		next.Agents = upgrade.NewAgents(c, spec.Version, ap.Plan)
		return next, true, nil
	}, func(rec *upgrade.Record) (string, string) {
		return "UpgradeApplyStarted", fmt.Sprintf("upgrade from %s to %s started by %s, carried out by the agents of %s (plan %s)",
			rec.FromVersion, rec.ToVersion, o.Rollouts.By, strings.Join(rec.PlanOf().WorkNodes(), ", "), rec.PlanOf().Name)
	})
}

// Resume asks the agent of the upgrade's failed step to run it again
// (upgrade.Record.Resumed), in one compare-and-swap write. It is refused
// (exit 4) when nothing failed, or when the upgrade is not the agents';
// with no upgrade recorded, exit 5. A warning says when the agent that
// would run the step again is not alive: the step waits for it.
func (o *Upgrades) Resume(ctx context.Context) (*UpgradeChange, error) {
	ch, err := o.write(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		return true, rec.Resumed()
	}), func(rec *upgrade.Record) (string, string) {
		msg := fmt.Sprintf("upgrade to %s resumed by %s (resume %d)", rec.ToVersion, o.Rollouts.By, rec.Agents.Resume)
		if f, ok := failureOf(rec); ok && f.node != "" {
			msg += fmt.Sprintf(": the agent of %s runs %s again", f.node, f.step)
		}
		return "UpgradeResumed", msg
	})
	if err != nil {
		return nil, err
	}
	if f, ok := failureOf(ch.Record); ok && f.node != "" {
		agents, err := o.Rollouts.Agents(ctx)
		if err != nil {
			ch.Warnings = append(ch.Warnings, "cannot tell whether the agent of "+f.node+" is alive: "+err.Error())
		} else if p := lostAgent(f.node, nodestate.AgentFor(agents, f.node)); p != "" {
			ch.Warnings = append(ch.Warnings, fmt.Sprintf("node %s: %s; %s runs again once its agent is back", f.node, p, f.step))
		}
	}
	return ch, nil
}

// lostAgent says how node's agent, as Agents shows it, is not alive ("" when
// it is).
func lostAgent(node string, agent nodestate.Agent) string {
	switch agent.Liveness {
	case nodestate.AgentNone:
		return fmt.Sprintf("no agent (no Lease %s)", nodestate.LeaseName(node))
	case nodestate.AgentLost:
		return "its agent looks lost (" + agent.Seen() + ")"
	}
	return ""
}
