package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/controlplane"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/nodestate"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// Before a rollout starts: no other is active, the nodes it goes to are
// control-plane nodes, and every control-plane node can bear it.

// MirrorPodNamespace is where the kubelet publishes the mirror Pods of
// kubeadm's static Pods.
const MirrorPodNamespace = "kube-system"

// Preflight checks that spec can start now, and returns it with its node
// order: spec.Nodes when given (each must be a control-plane node), else
// every control-plane node sorted by name. It refuses with exit 4, writing
// nothing, while another rollout is active (naming it), for a node that is
// not a control-plane node (naming those that are), and when a
// control-plane node is not ready for a rollout: its agent is missing or
// lost (refused at once), or one of its components' mirror Pods is missing
// or not Ready (waited for first, see nodesReady). Every control-plane node
// is checked, also those spec leaves out: while one node's components
// restart, the others carry the control plane.
func (o *Rollouts) Preflight(ctx context.Context, spec rollout.Spec) (rollout.Spec, error) {
	r, _, err := o.Read(ctx)
	if err != nil {
		return spec, err
	}
	if err := r.Idle(); err != nil {
		return spec, err
	}
	cps, err := o.Record.ControlPlaneNodes(ctx)
	if err != nil {
		return spec, err
	}
	if len(cps) == 0 {
		return spec, exitcode.Conflictf("no node is labelled %s: there is no control-plane node to roll out to (is this a kubeadm cluster?)", engine.ControlPlaneLabel)
	}
	if len(spec.Nodes) == 0 {
		spec.Nodes = cps
	}
	var unknown []string
	for _, n := range spec.Nodes {
		if !slices.Contains(cps, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		what := "node " + unknown[0] + " is not a control-plane node"
		if len(unknown) > 1 {
			what = "nodes " + joinNames(unknown) + " are not control-plane nodes"
		}
		return spec, exitcode.Conflictf("%s (the control-plane nodes: %s); nothing was started", what, joinNames(cps))
	}
	if err := checkSpec(spec); err != nil {
		return spec, err
	}
	return spec, o.nodesReady(ctx, cps)
}

// checkSpec checks what a start will check again, before any document is
// pinned: the order, the canary, the try.
func checkSpec(spec rollout.Spec) error {
	if len(spec.Target) == 0 {
		spec.Target = []byte("-") // pinned later
	}
	return spec.Validate()
}

// problem is one thing that keeps a node from bearing a rollout, as a
// refusal says it; waiting, when waiting may fix it, is what a wait for it
// says (a component not Ready yet, an agent's Lease being watched), and
// lease is true for a Lease being watched.
type problem struct {
	text, waiting string
	lease         bool
}

// nodesReady checks every control-plane node in nodes, and waits for what
// waiting can fix: a mirror Pod missing or not Ready (a component
// restarting after the last rollout) for up to PreflightWait, within ctx;
// an agent's Lease that looks stale on the clock of the API server that
// answered is watched, for up to its own duration, before its agent is
// taken for lost (nodestate.Observer). An agent missing or lost is refused
// at once, naming every node and everything wrong with it (exit 4).
func (o *Rollouts) nodesReady(ctx context.Context, nodes []string) error {
	wait := o.PreflightWait
	if wait <= 0 {
		wait = DefaultPreflightWait
	}
	start := time.Now()
	watched := &nodestate.Observer{}
	said := ""
	var all []string // what the last look found
	refused := func() error {
		return exitcode.Conflictf("preflight failed after waiting %s, nothing was started: %s", time.Since(start).Round(time.Second), strings.Join(all, "; "))
	}
	for {
		problems, poll, err := o.problems(ctx, nodes, watched)
		if err != nil && ctx.Err() != nil && all != nil {
			return refused() // the wait ended during a look
		}
		if err != nil {
			return err
		}
		var waitingFor []string
		all = nil
		hard, watching := false, false
		for _, n := range nodes {
			var texts, waits []string
			for _, p := range problems[n] {
				texts = append(texts, p.text)
				if p.waiting != "" {
					waits = append(waits, p.waiting)
				}
				hard = hard || p.waiting == ""
				watching = watching || p.lease
			}
			if len(texts) > 0 {
				all = append(all, fmt.Sprintf("node %s: %s", n, strings.Join(texts, ", ")))
			}
			if len(waits) > 0 {
				waitingFor = append(waitingFor, fmt.Sprintf("node %s: %s", n, strings.Join(waits, ", ")))
			}
		}
		switch {
		case len(all) == 0:
			return nil
		case hard:
			return exitcode.Conflictf("preflight failed, nothing was started: %s", strings.Join(all, "; "))
		}
		if time.Since(start) >= wait && !watching {
			return refused()
		}
		if line := strings.Join(waitingFor, "; "); line != said && o.Progress != nil {
			o.Progress(fmt.Sprintf("preflight: waiting up to %s for %s", wait, line))
			said = line
		}
		select {
		case <-ctx.Done(): // --timeout, or an interrupt
			return refused()
		case <-time.After(poll):
		}
	}
}

// DefaultPreflightWait is how long a preflight waits, when not told, for a
// control-plane node's components to be Ready.
const DefaultPreflightWait = 2 * time.Minute

// problems reads what keeps each node from bearing a rollout: its
// components' mirror Pods and its agent, whose Lease, when it looks stale,
// is shown to watched. poll is how soon to look again.
func (o *Rollouts) problems(ctx context.Context, nodes []string, watched *nodestate.Observer) (map[string][]problem, time.Duration, error) {
	byNode, at, now, err := o.agentLeases(ctx)
	if err != nil {
		return nil, 0, err
	}
	poll := time.Second
	out := map[string][]problem{}
	for _, n := range nodes {
		for _, c := range controlplane.Components() {
			name := c.PodName() + "-" + n
			pod, err := o.Record.Pod(ctx, MirrorPodNamespace, name)
			switch {
			case err != nil:
				return nil, 0, err
			case pod == nil:
				text := fmt.Sprintf("no mirror Pod %s/%s", MirrorPodNamespace, name)
				out[n] = append(out[n], problem{text: text, waiting: text})
			case !podReady(pod):
				text := c.PodName() + " is not Ready"
				out[n] = append(out[n], problem{text: text, waiting: text})
			}
		}
		if p, next := o.agentProblem(n, byNode[n], at, now, watched); p != nil {
			out[n] = append(out[n], *p)
			if p.lease {
				poll = min(poll, next)
			}
		}
	}
	return out, poll, nil
}

// agentLeases reads the agents' Leases, by node, with when they were read
// on this process's clock (at) and on the API server's (now).
func (o *Rollouts) agentLeases(ctx context.Context) (byNode map[string]*coordinationv1.Lease, at, now time.Time, err error) {
	leases, err := o.Record.Leases(ctx, nodestate.Label)
	if err != nil {
		return nil, time.Time{}, time.Time{}, err
	}
	at, now = time.Now(), o.now() // this process's clock, and the server's
	byNode = map[string]*coordinationv1.Lease{}
	for i := range leases {
		if node, _, ok, _ := nodestate.FromLease(&leases[i]); ok {
			byNode[node] = &leases[i]
		}
	}
	return byNode, at, now, nil
}

// agentProblem judges node's agent by its Lease l (nil: it has none), read
// at at on this process's clock and now on the API server's, for a
// preflight: nil when it is alive, or was seen renewed while watched. One
// that looks stale by the API server's clock is shown to watched; until it
// has stayed unchanged for its own duration the problem is one waiting may
// fix (lease true), to look at again within poll. Every preflight judges
// agents so, a rollout's and an upgrade's.
func (o *Rollouts) agentProblem(node string, l *coordinationv1.Lease, at, now time.Time, watched *nodestate.Observer) (p *problem, poll time.Duration) {
	if l == nil {
		return &problem{text: fmt.Sprintf("no agent (no Lease %s)", nodestate.LeaseName(node))}, 0
	}
	if nodestate.Alive(l, now, o.StaleAfter) {
		return nil, 0
	}
	seen := "its Lease was never renewed"
	if age, ok := nodestate.LastSeen(l, now); ok {
		seen = "last seen " + duration.HumanDuration(max(age, 0)) + " ago"
	}
	limit := nodestate.StaleAfter(l, o.StaleAfter)
	switch verdict, quiet := watched.Observe(l, at, o.StaleAfter); verdict {
	case nodestate.Silent:
		return &problem{text: fmt.Sprintf("its agent is lost (%s; its Lease did not change in the %s watched)", seen, quiet.Round(time.Second))}, 0
	case nodestate.Watching:
		return &problem{lease: true,
			text:    fmt.Sprintf("its agent looks lost (%s by the API server's clock, not confirmed)", seen),
			waiting: fmt.Sprintf("its agent looks lost by the API server's clock: watching its Lease for up to %s", limit)}, max(limit/5, 100*time.Millisecond)
	}
	return nil, 0
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
