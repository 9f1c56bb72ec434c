package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
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

// renderGap is the least time between two finds that only a change of
// kubeadm-config asks for: each runs kubeadm once per component, and a
// writer that changes the document every second (a script, config
// management) must not have every control-plane node run kubeadm as
// often. The node's own change (its turn ended) is found at once.
const renderGap = 5 * time.Second

// do finds the node's state again when kubeadm-config changed since it was
// last found (at most once per renderGap), StateResync has passed, or the
// node changed, and publishes it when it changed.
func (w *states) do(ctx context.Context, e *env) time.Duration {
	if !e.configSeen {
		// Not read yet (another follower's first copy came first): the
		// state would say kubeadm-config was not found, which is not so.
		return 0
	}
	rv := ""
	if e.view.Config != nil {
		rv = e.view.Config.ResourceVersion
	}
	if !w.stale && w.last != nil && rv == w.rv && time.Since(w.at) < e.cfg.StateResync {
		return 0
	}
	if since := time.Since(w.at); !w.stale && w.last != nil && rv != w.rv && since < renderGap {
		return renderGap - since
	}
	st := w.find(ctx, e)
	w.rv, w.at, w.stale = rv, time.Now(), false
	if w.last == nil || w.last.InSync != st.InSync || !slices.Equal(w.last.Differs, st.Differs) ||
		w.last.LiveHash != st.LiveHash || w.last.Error != st.Error || w.last.LastKnownGood != st.LastKnownGood {
		switch {
		case st.Error != "":
			e.log.warn("NodeState", "node %s: its state cannot be found: %s", e.cfg.Name, st.Error)
		case st.InSync:
			e.log.info("NodeState", "node %s is in sync with kubeadm-config (resourceVersion %s)", e.cfg.Name, st.LiveResourceVersion)
		default:
			e.log.info("NodeState", "node %s is out of sync with kubeadm-config (resourceVersion %s): %s differ",
				e.cfg.Name, st.LiveResourceVersion, joinNames(st.Differs))
		}
	}
	w.last = &st
	var l coordinationv1.Lease
	if err := nodestate.SetState(&l, st); err == nil {
		e.lease.Annotate(nodestate.Annotation, l.Annotations[nodestate.Annotation])
	}
	return 0
}

// find renders the live document for this node with kubeadm and compares
// the result with the running manifests.
func (w *states) find(ctx context.Context, e *env) (st nodestate.State) {
	st.AgentVersion = e.cfg.Version
	if !e.cfg.CertificateExpires.IsZero() {
		st.CertificateExpires = stamp(e.cfg.CertificateExpires)
	}
	defer func() { st.CheckedAt = stamp(e.cfg.Clock.Now()) }()
	w.compared = nil
	t := e.cfg.Config.Target()
	if lg, err := e.cfg.Store.LastGood(t.Namespace, t.Name, e.cfg.Name); err == nil {
		st.LastKnownGood = lg.Name
	}
	if e.cfg.Upgrade != nil {
		st.KubeadmVersions = e.cfg.Upgrades.Kubeadms.Versions(ctx)
		st.Etcd = e.etcdHealth(ctx)
	}
	live := e.view.Config
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
	node := e.nodeFor([]byte(doc))
	rep, err := reconfigure.Run(ctx, node, reconfigure.Request{
		Source: reconfigure.Source{Pinned: live}, DryRun: true,
		// Only a comparison: what differs is the answer, whatever it is,
		// an image tag included. But a kubeadm of another minor release
		// renders that release's defaults (its etcd, its flags), not what
		// the node should run: no verdict from it.
		AllowImageChange: true, AllowDuringUpgrade: true,
	})
	if err != nil {
		st.Error = stateError(node.Kubeadm, err)
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

// stateError says why the node's state cannot be found. A kubeadm of
// another minor release than the document's kubernetesVersion (the new
// release's, installed before the upgrade as kubeadm's own procedure has
// it) is named with its path and release, and what would give a verdict.
func stateError(kubeadm string, err error) string {
	var release *controlplane.KubeadmReleaseError
	if errors.As(err, &release) && !release.NoRelease {
		return fmt.Sprintf("the node's kubeadm %s is %s, of another minor release than kubernetesVersion %s: it renders its own release's manifests, not what the node should run; no verdict until the agent has a kubeadm of the document's release",
			kubeadm, release.Kubeadm, release.KubernetesVersion)
	}
	return exitcode.Message(err)
}
