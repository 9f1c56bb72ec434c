package upgrade

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// An upgrade the node agents carry out (upgrade-apply): the plan's steps
// that are a node's work are run by that node's agent, one node at a time,
// with the real kubeadm, and every phase is recorded here. The agent of a
// step is its runner (BeginRun, EndRun), with a heartbeat, so the audit
// fails the step of an agent that dies; Agents adds where each node is,
// phase by phase, and the resumes an operator asked for.

// KeyApply holds an Agents, as JSON: present when the agents carry the
// upgrade out.
const KeyApply = Prefix + "apply"

// The work of a plan's step for the agents (Step.Work).
const (
	// WorkControlPlane is a node's `kubeadm upgrade apply VERSION` (the
	// plan's first such step) or `kubeadm upgrade node` (every later one),
	// phase by phase.
	WorkControlPlane = "control-plane"
	// WorkKubelets is a phase whose work is done per host: each
	// control-plane node's kubelet, one at a time in the plan's order
	// (the host step the plan names first), after which the last node's
	// agent completes the upgrade.
	WorkKubelets = "kubelets"
)

// The outcome of a node's step, as Agents records it.
const (
	NodeRunning        = "Running"
	NodeDone           = "Done"
	NodeFailed         = "Failed"
	NodeRolledBack     = "RolledBack"
	NodeRollbackFailed = "RollbackFailed"
)

// Agents says that the agents carry the upgrade out, and where each node is.
type Agents struct {
	// Version is the target, ToVersion.
	Version   string `json:"version"`
	By        string `json:"by"`
	StartedAt string `json:"startedAt"`
	// Resume counts upgrade-resume: the agent of a failed step runs it
	// again once for each resume it has not run yet (its Attempt).
	Resume int `json:"resume"`
	// Nodes is where each node is, in the plan's order of its steps.
	Nodes []NodeProgress `json:"nodes"`
}

// NodeProgress is where one node is.
type NodeProgress struct {
	Node string `json:"node"`
	// Step is the step (or host step) it runs, or last ran.
	Step string `json:"step,omitempty"`
	// Phase is the kubeadm phase it runs or last ran ("kubelet" for the
	// kubelet's step, "gate" for the checks before the next node), since
	// PhaseSince (RFC 3339, the API server's clock).
	Phase      string `json:"phase,omitempty"`
	PhaseSince string `json:"phaseSince,omitempty"`
	// Attempt is the resume (Agents.Resume) it last ran its step for.
	Attempt int `json:"attempt"`
	// Outcome is NodeRunning, NodeDone, NodeFailed, NodeRolledBack or
	// NodeRollbackFailed; empty before its first step.
	Outcome string `json:"outcome,omitempty"`
	// Message says why it failed: the phase and the last output lines.
	Message string `json:"message,omitempty"`
}

// decodeAgents reads the Agents of annotations; nil when the upgrade is not
// the agents'.
func decodeAgents(annotations map[string]string) (*Agents, error) {
	v, ok := annotations[KeyApply]
	if !ok {
		return nil, nil
	}
	var a Agents
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		return nil, exitcode.Invalidf("annotation %s is not what upgrade-apply writes: %w", KeyApply, err)
	}
	return &a, nil
}

// Node returns node's progress, adding it when missing.
func (a *Agents) Node(node string) *NodeProgress {
	for i := range a.Nodes {
		if a.Nodes[i].Node == node {
			return &a.Nodes[i]
		}
	}
	a.Nodes = append(a.Nodes, NodeProgress{Node: node})
	return &a.Nodes[len(a.Nodes)-1]
}

// NewAgents is the Agents of an upgrade to version the agents carry out over
// plan's nodes, started by c.
func NewAgents(c Clock, version string, plan *Plan) *Agents {
	a := &Agents{Version: version, By: c.By, StartedAt: c.stamp(), Nodes: []NodeProgress{}}
	for _, n := range plan.WorkNodes() {
		a.Node(n)
	}
	return a
}

// BeginPhase records that node runs phase of step now.
func (a *Agents) BeginPhase(c Clock, node, step, phase string) {
	p := a.Node(node)
	p.Step, p.Phase, p.PhaseSince, p.Outcome, p.Message = step, phase, c.stamp(), NodeRunning, ""
	p.Attempt = a.Resume
}

// EndNode records how node's step ended.
func (a *Agents) EndNode(node, outcome, message string) {
	p := a.Node(node)
	p.Outcome, p.Message = outcome, BoundReason(message)
}

// Resumed asks the agent of the failed step to run it again, once (see
// TurnOf): the upgrade must be in a step's -failed state, or a host in a
// failed host status.
func (r *Record) Resumed() error {
	a := r.Agents
	if a == nil {
		return exitcode.Conflictf("the upgrade from %s to %s is not carried out by the agents (upgrade-apply): run its failed step again with upgrade-run", r.FromVersion, r.ToVersion)
	}
	if !r.plan().Failed(r.State) && r.FailedHost() == "" {
		return exitcode.Conflictf("the upgrade is in %s, and no step or host failed: there is nothing to resume", r.State)
	}
	a.Resume++
	return nil
}

// WorkNodes are the nodes the plan's steps are the work of, in order, each
// once.
func (p *Plan) WorkNodes() []string {
	var out []string
	for _, s := range p.Steps {
		if s.Work == WorkControlPlane && s.Node != "" && !slices.Contains(out, s.Node) {
			out = append(out, s.Node)
		}
	}
	for _, n := range p.ControlPlaneNodes {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// FirstControlPlaneStep is the plan's first control-plane step: the one
// that runs kubeadm upgrade apply (the later ones run kubeadm upgrade
// node). Nil when the plan has none.
func (p *Plan) FirstControlPlaneStep() *Step {
	for i := range p.Steps {
		if p.Steps[i].Work == WorkControlPlane && p.Steps[i].Node != "" {
			return &p.Steps[i]
		}
	}
	return nil
}

// KubeletStep is the host step a kubelets phase runs on each node.
func (p *Plan) KubeletStep() *HostStep {
	if len(p.HostSteps) == 0 {
		return nil
	}
	for i := range p.HostSteps {
		if p.HostSteps[i].Name == HostUpgradingKubelet {
			return &p.HostSteps[i]
		}
	}
	return &p.HostSteps[0]
}

// PhaseFailure is the reason a failed phase is recorded with: the node, the
// step, the phase, why, and the last lines of its output (Tail.Last).
func PhaseFailure(node, step, phase, why, output string) string {
	msg := fmt.Sprintf("node %s: %s: phase %s failed: %s", node, step, phase, why)
	if output != "" {
		msg += "; last output: " + output
	}
	return BoundReason(msg)
}

// TakeOver is run.ID, a later agent of the same node, taking over the
// step an earlier agent (lost, which died: the later one holds the node's
// Lease) left in progress: the earlier runner is kept as lost, with the
// process it ran, and the step begins again under run (BeginRun), refused
// while run.Check sees that process still running (a LiveCommandError), so
// that kubeadm never runs twice at once on the node.
func (r *Record) TakeOver(c Clock, lost string, run Run) (Runner, error) {
	if r.runnerByID(lost) == nil {
		return Runner{}, exitcode.Conflictf("the step is no longer held by %s: someone moved it meanwhile (the upgrade is in %s)", lost, r.State)
	}
	r.lose(func(rn Runner) bool { return rn.ID == lost })
	return r.BeginRun(c, run)
}
