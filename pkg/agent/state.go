package agent

import (
	"context"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/reconfigure"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// states is the work of publishing the node's state on the agent's Lease,
// whether or not a rollout runs: whether the node runs what the live
// ClusterConfiguration renders to, found by the same dry run `reconfigure
// --diff` makes.
type states struct {
	a *Agent

	rv    string    // the kubeadm-config version the state was found for
	at    time.Time // when it was found (local monotonic clock)
	last  *nodestate.State
	stale bool // the node changed since: find it again on the next pass
	// compared are the components the last state compared, in the
	// order kubeadm renders them; nil when it could not compare.
	compared []string
}

// changed says that the node changed (its turn ended): its state is found
// again on this pass.
func (w *states) changed() { w.stale = true }

// do finds the node's state again when kubeadm-config changed since it was
// last found, StateResync has passed, or the node changed, and publishes
// it when it changed.
func (w *states) do(ctx context.Context) time.Duration {
	a := w.a
	if !a.configSeen {
		// Not read yet (another follower's first copy came first): the
		// state would say kubeadm-config was not found, which is not so.
		return 0
	}
	rv := ""
	if a.view.Config != nil {
		rv = a.view.Config.ResourceVersion
	}
	if !w.stale && w.last != nil && rv == w.rv && time.Since(w.at) < a.cfg.StateResync {
		return 0
	}
	st := w.find(ctx)
	w.rv, w.at, w.stale = rv, time.Now(), false
	if w.last == nil || w.last.InSync != st.InSync || !slices.Equal(w.last.Differs, st.Differs) ||
		w.last.LiveHash != st.LiveHash || w.last.Error != st.Error || w.last.LastKnownGood != st.LastKnownGood {
		switch {
		case st.Error != "":
			a.warn("NodeState", "node %s: its state cannot be found: %s", a.cfg.Name, st.Error)
		case st.InSync:
			a.info("NodeState", "node %s is in sync with kubeadm-config (resourceVersion %s)", a.cfg.Name, st.LiveResourceVersion)
		default:
			a.info("NodeState", "node %s is out of sync with kubeadm-config (resourceVersion %s): %s differ",
				a.cfg.Name, st.LiveResourceVersion, joinNames(st.Differs))
		}
	}
	w.last = &st
	var l coordinationv1.Lease
	if err := nodestate.SetState(&l, st); err == nil {
		a.lease.Annotate(nodestate.Annotation, l.Annotations[nodestate.Annotation])
	}
	return 0
}

// find renders the live document for this node with kubeadm and compares
// the result with the running manifests.
func (w *states) find(ctx context.Context) (st nodestate.State) {
	a := w.a
	st.AgentVersion = a.cfg.Version
	if !a.cfg.CertificateExpires.IsZero() {
		st.CertificateExpires = stamp(a.cfg.CertificateExpires)
	}
	defer func() { st.CheckedAt = stamp(a.cfg.Clock.Now()) }()
	w.compared = nil
	t := a.cfg.Config.Target()
	if lg, err := a.cfg.Store.LastGood(t.Namespace, t.Name, a.cfg.Name); err == nil {
		st.LastKnownGood = lg.Name
	}
	if a.cfg.Upgrade != nil {
		st.KubeadmVersions = a.cfg.Upgrades.Kubeadms.Versions(ctx)
		st.Etcd = a.etcdHealth(ctx)
	}
	live := a.view.Config
	if live == nil {
		st.Error = t.String() + " was not found"
		return st
	}
	doc, ok := live.Data[t.Key]
	if !ok {
		st.Error = t.String() + " has no key " + t.Key
		return st
	}
	st.LiveHash, st.LiveResourceVersion = rollout.Hash([]byte(doc)), live.ResourceVersion
	rep, err := reconfigure.Run(ctx, a.nodeFor([]byte(doc)), reconfigure.Request{
		Source: reconfigure.Source{Pinned: live}, DryRun: true,
		// Only a comparison: what differs is the answer, whatever it is.
		AllowVersionChange: true, AllowDuringUpgrade: true,
	})
	if err != nil {
		st.Error = exitcode.Message(err)
		return st
	}
	st.Differs = []string{}
	for _, ch := range rep.Plan.Changes {
		w.compared = append(w.compared, ch.Component.PodName())
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

// etcdHealth is the health of the node's etcd member, as an upgrade's
// preflight needs it: the member answers, and its cluster passes the
// checks a change of it would (every member healthy, no alarm). Nil on a
// node without a local member.
func (a *Agent) etcdHealth(ctx context.Context) *nodestate.EtcdHealth {
	client, err := a.cfg.Node.EtcdClient()
	if client == nil && err == nil {
		return nil
	}
	if err != nil {
		return &nodestate.EtcdHealth{Error: exitcode.Message(err)}
	}
	defer client.Close()
	cl, err := client.Cluster(ctx)
	if err != nil {
		return &nodestate.EtcdHealth{Error: exitcode.Message(err)}
	}
	h := &nodestate.EtcdHealth{Healthy: true}
	if m, ok := cl.LocalMember(); ok {
		h.Member = m.String()
	}
	var problems []string
	for _, m := range cl.Members {
		if !m.Healthy() {
			problems = append(problems, m.String()+": "+m.Problem)
		}
	}
	for _, al := range cl.Alarms {
		problems = append(problems, "alarm "+al.String())
	}
	if len(problems) > 0 {
		h.Healthy, h.Error = false, strings.Join(problems, "; ")
	}
	return h
}
