package operator

import (
	"context"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
)

// Agents reads every agent Lease in the record's namespace and judges each
// on the API server's clock: alive when renewed within its own duration
// (or StaleAfter). The map is keyed by node; nodes without a Lease are not
// in it. This is what status and nodes display; a preflight and abandon,
// which act on it, confirm a Lease that looks stale by watching it.
func (o *Rollouts) Agents(ctx context.Context) (map[string]nodestate.Agent, error) {
	leases, err := o.Record.Leases(ctx, nodestate.Label)
	if err != nil {
		return nil, err
	}
	now := o.now() // after the list: the server's Date of its answer
	agents := make(map[string]nodestate.Agent, len(leases))
	for i := range leases {
		if a, ok := nodestate.Judge(&leases[i], now, o.StaleAfter); ok {
			agents[a.Node] = a
		}
	}
	return agents, nil
}
