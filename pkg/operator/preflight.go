package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
// control-plane node is not ready for a rollout: one of its components'
// mirror Pods is missing or not Ready, or its agent is missing or lost.
// Every control-plane node is checked, also those spec leaves out: while
// one node's components restart, the others carry the control plane.
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
	agents, err := o.Agents(ctx)
	if err != nil {
		return spec, err
	}
	var problems []string
	for _, n := range cps {
		found, err := o.nodeProblems(ctx, n, nodestate.AgentFor(agents, n))
		if err != nil {
			return spec, err
		}
		if len(found) > 0 {
			problems = append(problems, fmt.Sprintf("node %s: %s", n, strings.Join(found, ", ")))
		}
	}
	if len(problems) > 0 {
		return spec, exitcode.Conflictf("preflight failed, nothing was started: %s", strings.Join(problems, "; "))
	}
	return spec, nil
}

// checkSpec checks what a start will check again, before any document is
// pinned: the order, the canary, the try.
func checkSpec(spec rollout.Spec) error {
	if len(spec.Target) == 0 {
		spec.Target = []byte("-") // pinned later
	}
	return spec.Validate()
}

// nodeProblems lists what keeps node from bearing a rollout: its
// components' mirror Pods and its agent.
func (o *Rollouts) nodeProblems(ctx context.Context, node string, agent nodestate.Agent) ([]string, error) {
	var problems []string
	for _, c := range controlplane.Components() {
		name := c.PodName() + "-" + node
		pod, err := o.Record.Pod(ctx, MirrorPodNamespace, name)
		switch {
		case err != nil:
			return nil, err
		case pod == nil:
			problems = append(problems, fmt.Sprintf("no mirror Pod %s/%s", MirrorPodNamespace, name))
		case !podReady(pod):
			problems = append(problems, c.PodName()+" is not Ready")
		}
	}
	if p := agentProblem(node, agent); p != "" {
		problems = append(problems, p)
	}
	return problems, nil
}

// agentProblem says what keeps node's agent from taking work ("" when it
// is alive): it has no Lease, or its Lease went unrenewed. A rollout's and
// an upgrade's preflight refuse a node for it in the same words.
func agentProblem(node string, agent nodestate.Agent) string {
	switch agent.Liveness {
	case nodestate.AgentNone:
		return fmt.Sprintf("no agent (no Lease %s)", nodestate.LeaseName(node))
	case nodestate.AgentLost:
		seen := "its Lease was never renewed"
		if agent.LastSeen != nil {
			seen = "last seen " + duration.HumanDuration(agent.LastSeen.Duration) + " ago"
		}
		return "its agent is lost (" + seen + ")"
	}
	return ""
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
