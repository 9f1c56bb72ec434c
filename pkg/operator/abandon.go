package operator

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// AbandonResult is what an abandon did.
type AbandonResult struct {
	*Change
	// Node is the node given up on; AgentGone says how its agent was found
	// gone.
	Node      string
	AgentGone string
}

// Abandon gives up on node in the current rollout (rollout.Record.Abandon):
// in a rollout it is marked RollbackFailed, its state unknown, and the
// rollout fails, so that undo and start work again; in an undo or a revert
// it is dropped from the order. It is allowed only while node's agent is
// gone: no Lease, or a Lease seen unchanged for its whole duration while
// watched, on this process's clock, whatever its renewTime says on any API
// server's clock (nodestate.Observer). An agent seen renewing its Lease is
// refused (exit 4), as is what the record refuses, before anything is
// watched. Recorded in the history and as a Warning Event on the record.
func (o *Rollouts) Abandon(ctx context.Context, node string) (*AbandonResult, error) {
	r, _, err := o.Read(ctx)
	if err != nil {
		return nil, err
	}
	if r.Status == nil {
		return nil, o.noRollout()
	}
	// Tried on the copy just read, so that a refusal comes before the wait.
	if _, err := r.Abandon(o.clock(), node); err != nil {
		return nil, err
	}
	gone, err := o.agentGone(ctx, node)
	if err != nil {
		return nil, err
	}
	ch, err := o.transitionAs(ctx, corev1.EventTypeWarning, func(r *rollout.Record) (bool, error) {
		return r.Abandon(o.clock(), node)
	}, func(s *rollout.Status) (string, string) {
		what := "failed the rollout"
		if s.Kind != rollout.KindRollout {
			what = "dropped it from the " + string(s.Kind) + "'s order"
		}
		return "NodeAbandoned", fmt.Sprintf("rollout %d: node %s abandoned by %s (%s): its state is unknown; %s", s.ID, node, o.By, gone, what)
	})
	if err != nil {
		return nil, err
	}
	return &AbandonResult{Change: ch, Node: node, AgentGone: gone}, nil
}

// agentGone watches node's agent Lease until it changes (its agent is
// alive: refused, exit 4) or stays unchanged for its whole duration (gone),
// and says how it was found gone. A node without a Lease has no agent.
func (o *Rollouts) agentGone(ctx context.Context, node string) (string, error) {
	watched := &nodestate.Observer{}
	where := o.Record.Target().Namespace + "/" + nodestate.LeaseName(node)
	said := false
	for {
		leases, err := o.Record.Leases(ctx, nodestate.Label+"="+node)
		if err != nil {
			return "", err
		}
		var l *coordinationv1.Lease
		for i := range leases {
			if n, _, ok, _ := nodestate.FromLease(&leases[i]); ok && n == node {
				l = &leases[i]
			}
		}
		if l == nil {
			return "it has no agent Lease " + where, nil
		}
		limit := nodestate.StaleAfter(l, o.StaleAfter)
		switch verdict, quiet := watched.Observe(l, time.Now(), o.StaleAfter); verdict {
		case nodestate.Renewed:
			return "", exitcode.Conflictf("the agent of node %s is alive: its Lease %s was renewed while watched; only a node whose agent is gone can be abandoned, "+
				"nothing was changed", node, where)
		case nodestate.Silent:
			return fmt.Sprintf("its agent's Lease %s did not change in the %s watched", where, quiet.Round(time.Second)), nil
		}
		if !said && o.Progress != nil {
			o.Progress(fmt.Sprintf("abandon: watching lease %s for up to %s: its agent must be gone", where, limit))
			said = true
		}
		select {
		case <-ctx.Done():
			return "", exitcode.Conflictf("stopped watching lease %s before it could tell whether the agent of node %s is gone: %v; nothing was changed", where, node, ctx.Err())
		case <-time.After(min(max(limit/10, 100*time.Millisecond), time.Second)):
		}
	}
}
