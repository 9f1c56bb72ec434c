package upgrade

import (
	"slices"
	"strings"
)

// TurnKind is what an upgrade the agents carry out asks of one node now.
type TurnKind string

// The kinds of turn.
const (
	// TurnNone: nothing, now (another node's step, a failure waiting for
	// upgrade-resume, an upgrade over or not the agents').
	TurnNone TurnKind = ""
	// TurnStep: run Step, this node's control-plane work.
	TurnStep TurnKind = "step"
	// TurnKubelet: run the host step Host, this node's kubelet.
	TurnKubelet TurnKind = "kubelet"
	// TurnEnter: move the upgrade into Step, a phase whose work is done
	// per host (the kubelets), so that the first node can take its turn.
	TurnEnter TurnKind = "enter"
	// TurnPass: record Step, which is no node's kubeadm work, as passed.
	TurnPass TurnKind = "pass"
	// TurnComplete: every node is done; move the upgrade to its end.
	TurnComplete TurnKind = "complete"
)

// Turn is what the upgrade asks of a node now.
type Turn struct {
	Kind TurnKind
	Step State
	Host HostStatus
	// Apply is the plan's first control-plane step: kubeadm upgrade apply,
	// not kubeadm upgrade node.
	Apply bool
	// Retry is a failed step run again, for an upgrade-resume.
	Retry bool
	// Lost is the runner an earlier agent of this node left on the step
	// (it was killed): this agent, which holds the node's Lease now, takes
	// the step over once that runner's process is gone. It may also be a
	// run of this very agent that is no longer under way (see TurnOf): the
	// agent could not record how it ended, or did not see its beginning
	// recorded.
	Lost *Runner
}

// AgentRunnerPrefix is how a node's agents name themselves as runners
// (agent/NODE/...): the runners this node's later agents may take over.
func AgentRunnerPrefix(node string) string { return "agent/" + node + "/" }

// TurnOf says what the upgrade asks of node now, when the agents carry it
// out (r.Agents); TurnNone otherwise. Only one step runs at a time, in the
// plan's order: a node's turn comes when the state allows its step to
// start, and a failed step is run again only after an upgrade-resume
// (Agents.Resume) its node has not run yet.
//
// running is the ID of the run the caller has under way now ("" when it
// runs none): its step is left to it. Any other run of the node's agents
// that holds the node's step is handed back as Turn.Lost, one of the
// caller's own included: a run that is not under way although the record
// says it is, because its end (or its beginning) was never seen recorded,
// is picked up on a later pass rather than never.
func (r *Record) TurnOf(node, running string) Turn {
	p, a := r.plan(), r.Agents
	if a == nil || p.Over(r.State) || p.Abort != nil && (r.State == p.Abort.Name || r.State == p.Abort.Failed) {
		return Turn{}
	}
	progress := a.Progress(node)
	step := p.StepOf(r.State)
	switch {
	case step != nil && r.State == step.Name && step.Work == WorkKubelets:
		return r.kubeletTurn(node, running, a)
	case step != nil && r.State == step.Name:
		if step.Work != WorkControlPlane || step.Node != node {
			return Turn{}
		}
		// This node's step, in progress: an earlier agent of the node
		// began it and died, a run of this agent ended unrecorded, or
		// someone set it by hand.
		held := r.runnerOf("", string(step.Name))
		if held != nil && running != "" && held.ID == running {
			return Turn{} // under way
		}
		if held != nil && !strings.HasPrefix(held.ID, AgentRunnerPrefix(node)) {
			return Turn{} // a run by hand: its own runner reports
		}
		return Turn{Kind: TurnStep, Step: step.Name, Apply: p.isApplyStep(step), Lost: held}
	case step != nil && r.State == step.Failed:
		retry := a.Resume > progress.Attempt
		switch {
		case !retry:
			return Turn{}
		case step.Work == WorkControlPlane && step.Node == node:
			return Turn{Kind: TurnStep, Step: step.Name, Apply: p.isApplyStep(step), Retry: true}
		case step.Work == WorkKubelets && node == firstOf(p.WorkNodes()):
			return Turn{Kind: TurnEnter, Step: step.Name, Retry: true}
		}
		return Turn{}
	}
	next := p.nextForward(r.State)
	if next == nil {
		return Turn{}
	}
	switch {
	case next.Work == WorkControlPlane && next.Node == node:
		return Turn{Kind: TurnStep, Step: next.Name, Apply: p.isApplyStep(next)}
	case next.Work == WorkKubelets && node == firstOf(p.WorkNodes()):
		return Turn{Kind: TurnEnter, Step: next.Name}
	case next.Work == "" && node == firstOf(p.WorkNodes()):
		return Turn{Kind: TurnPass, Step: next.Name}
	}
	return Turn{}
}

// kubeletTurn is node's turn in the per-host phase of the kubelets: one
// node at a time in the plan's order, each after every node before it is
// done; a failed one waits for upgrade-resume; the last node's agent ends
// the upgrade.
func (r *Record) kubeletTurn(node, running string, a *Agents) Turn {
	p := r.plan()
	ks := p.KubeletStep()
	if ks == nil {
		return Turn{}
	}
	order := p.WorkNodes()
	for _, n := range order {
		st := r.hostStatus(n)
		switch {
		case st == ks.Reaches:
			continue
		case n != node:
			return Turn{} // an earlier node's turn: in progress, failed, or not begun
		case st == ks.Name:
			held := r.runnerOf(n, string(ks.Name))
			if held != nil && ((running != "" && held.ID == running) || !strings.HasPrefix(held.ID, AgentRunnerPrefix(node))) {
				return Turn{}
			}
			return Turn{Kind: TurnKubelet, Host: ks.Name, Lost: held}
		case st == ks.Failed:
			if a.Resume > a.Progress(node).Attempt {
				return Turn{Kind: TurnKubelet, Host: ks.Name, Retry: true}
			}
			return Turn{}
		default:
			return Turn{Kind: TurnKubelet, Host: ks.Name}
		}
	}
	if len(order) > 0 && node == order[len(order)-1] {
		return Turn{Kind: TurnComplete}
	}
	return Turn{}
}

// nextForward is the step the upgrade goes on with from s, skipping
// optional steps that are no node's work or have no node to run on; nil
// when s goes on with no step (the complete state is next).
func (p *Plan) nextForward(s State) *Step {
	allowed := p.Allowed(s)
	for i := range p.Steps {
		st := &p.Steps[i]
		if !slices.Contains(allowed, st.Name) {
			continue
		}
		if st.Optional && (st.Work == "" || st.Work == WorkControlPlane && st.Node == "") {
			continue // skipped: the step after it is allowed too
		}
		return st
	}
	return nil
}

// isApplyStep reports whether st is the plan's first control-plane step.
func (p *Plan) isApplyStep(st *Step) bool {
	first := p.FirstControlPlaneStep()
	return first != nil && first.Name == st.Name
}

// Progress is node's progress, the zero one when none is recorded (or a
// is nil: the upgrade is not the agents').
func (a *Agents) Progress(node string) NodeProgress {
	if a == nil {
		return NodeProgress{Node: node}
	}
	for _, n := range a.Nodes {
		if n.Node == node {
			return n
		}
	}
	return NodeProgress{Node: node}
}

func firstOf(nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	return nodes[0]
}
