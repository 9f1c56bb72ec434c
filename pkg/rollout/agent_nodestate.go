package rollout

import (
	"context"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
)

// The node's state, published on the agent's Lease whether or not a
// rollout runs: whether the node runs what the live ClusterConfiguration
// renders to, found by the same dry run `reconfigure --diff` makes.

// refreshState finds the node's state again when kubeadm-config changed
// since it was last found, StateResync has passed, or force (after the
// node's turn), and publishes it when it changed.
func (a *Agent) refreshState(ctx context.Context, force bool) {
	rv := ""
	if a.live != nil {
		rv = a.live.ResourceVersion
	}
	if !force && a.lastState != nil && rv == a.stateRV && time.Since(a.stateAt) < a.cfg.StateResync {
		return
	}
	st := a.nodeState(ctx)
	a.stateRV, a.stateAt = rv, time.Now()
	changed := a.lastState == nil || a.lastState.InSync != st.InSync || !slices.Equal(a.lastState.Differs, st.Differs) ||
		a.lastState.LiveHash != st.LiveHash || a.lastState.Error != st.Error || a.lastState.LastKnownGood != st.LastKnownGood
	if changed {
		switch {
		case st.Error != "":
			a.log(true, "NodeState", "node %s: its state cannot be found: %s", a.cfg.Node.Name, st.Error)
		case st.InSync:
			a.log(false, "NodeState", "node %s is in sync with kubeadm-config (resourceVersion %s)", a.cfg.Node.Name, st.LiveResourceVersion)
		default:
			a.log(false, "NodeState", "node %s is out of sync with kubeadm-config (resourceVersion %s): %s differ",
				a.cfg.Node.Name, st.LiveResourceVersion, joinNames(st.Differs))
		}
	}
	a.lastState = &st
	var l coordinationv1.Lease
	if err := SetNodeState(&l, st); err == nil {
		a.lease.Annotate(NodeStateAnnotation, l.Annotations[NodeStateAnnotation])
	}
}

// nodeState renders the live document for this node with kubeadm and
// compares the result with the running manifests.
func (a *Agent) nodeState(ctx context.Context) (st NodeState) {
	st.AgentVersion = a.cfg.Version
	defer func() { st.CheckedAt = stamp(a.cfg.Clock.Now()) }()
	t := a.cfg.Config.Target()
	if lg, err := a.cfg.Store.LastGood(t.Namespace, t.Name, a.cfg.Node.Name); err == nil {
		st.LastKnownGood = lg.Name
	}
	if a.live == nil {
		st.Error = t.String() + " was not found"
		return st
	}
	doc, ok := a.live.Data[t.Key]
	if !ok {
		st.Error = t.String() + " has no key " + t.Key
		return st
	}
	st.LiveHash, st.LiveResourceVersion = Hash([]byte(doc)), a.live.ResourceVersion
	rep, err := reconfigure.Run(ctx, reconfigure.Request{
		Config: a.cfg.Config, Store: a.cfg.Store, Source: reconfigure.Source{Pinned: a.live}, Node: a.cfg.Node,
		ManifestsDir: a.cfg.ManifestsDir, Kubeadm: a.cfg.Kubeadm, DryRun: true,
		// Only a comparison: what differs is the answer, whatever it is.
		AllowVersionChange: true, AllowDuringUpgrade: true,
	})
	if err != nil {
		st.Error = exitcode.Message(err)
		return st
	}
	st.Differs = []string{}
	for _, ch := range rep.Plan.Changes {
		if ch.Changed() {
			st.Differs = append(st.Differs, ch.Component.PodName())
		}
	}
	st.InSync = len(st.Differs) == 0
	if st.InSync {
		st.Differs = nil
	}
	return st
}
