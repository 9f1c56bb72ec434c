package upgrade

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
)

// The transitions a plan allows, as a graph of its states, and the
// questions the commands ask of it.

type role int

const (
	roleStart role = iota
	roleInProgress
	roleFailed
	roleReached
	roleComplete
)

func (r role) String() string {
	return [...]string{"start", "in-progress state of a step", "failed state of a step", "state a step reaches", "complete state"}[r]
}

// section is where in the plan a state is.
type section int

const (
	sectionMain section = iota
	sectionAfterComplete
	sectionAbort
)

type node struct {
	role    role
	section section
	step    *Step   // the step of an in-progress, failed or reached state
	index   int     // 1-based position of the step in Steps (main section)
	from    []State // what an in-progress (or the complete) state may start from
}

// graph is a plan's transition rules, computed from its order.
type graph struct {
	order []State // every state, in the order of the plan
	nodes map[State]*node
}

// build computes the rules; dup lists names given twice.
func (p *Plan) build() (g *graph, dup []State) {
	g = &graph{nodes: map[State]*node{}}
	add := func(s State, n *node) {
		if s == "" {
			return
		}
		if _, ok := g.nodes[s]; ok {
			dup = append(dup, s)
			return
		}
		g.nodes[s] = n
		g.order = append(g.order, s)
	}
	add(p.Start, &node{role: roleStart})
	chain := func(steps []Step, carry []State, sec section) []State {
		for i := range steps {
			st := &steps[i]
			from := carry
			if len(st.After) > 0 {
				from = slices.Clone(st.After)
			}
			idx := 0
			switch sec {
			case sectionMain:
				idx = i + 1
			case sectionAfterComplete:
				idx = len(p.Steps) + 1
			}
			add(st.Name, &node{role: roleInProgress, section: sec, step: st, index: idx, from: from})
			add(st.Failed, &node{role: roleFailed, section: sec, step: st, index: idx})
			add(st.Reaches, &node{role: roleReached, section: sec, step: st, index: idx})
			end := st.Reaches
			if end == "" {
				end = st.Name
			}
			if st.Optional {
				carry = union([]State{end}, carry)
			} else {
				carry = []State{end}
			}
		}
		return carry
	}
	carry := chain(p.Steps, []State{p.Start}, sectionMain)
	add(p.Complete, &node{role: roleComplete, index: len(p.Steps) + 1, from: carry})
	chain(p.AfterComplete, []State{p.Complete}, sectionAfterComplete)
	if p.Abort != nil {
		// Any state before Complete may abort, and a failed abort may retry.
		var from []State
		for _, s := range g.order {
			if n := g.nodes[s]; n.section == sectionMain && n.role != roleComplete {
				from = append(from, s)
			}
		}
		from = append(from, p.Abort.Failed)
		abort := []Step{*p.Abort}
		abort[0].After = from
		chain(abort, nil, sectionAbort)
	}
	return g, dup
}

func union(a, b []State) []State {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// allowed is the transition rule: a step from what it may start from or
// its own failed state; a step's end or failure only from the step; the
// start state never (only upgrade-start records it).
func (g *graph) allowed(from, to State) bool {
	n, ok := g.nodes[to]
	if !ok || from == to {
		return false
	}
	if _, ok := g.nodes[from]; !ok {
		return false
	}
	switch n.role {
	case roleInProgress:
		return slices.Contains(n.from, from) || from == n.step.Failed
	case roleFailed, roleReached:
		return from == n.step.Name
	case roleComplete:
		return slices.Contains(n.from, from)
	}
	return false
}

// unreachable lists the states no path from the start reaches.
func (g *graph) unreachable(p *Plan) []State {
	seen := map[State]bool{p.Start: true}
	queue := []State{p.Start}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, to := range g.order {
			if !seen[to] && g.allowed(from, to) {
				seen[to] = true
				queue = append(queue, to)
			}
		}
	}
	var out []State
	for _, s := range g.order {
		if !seen[s] {
			out = append(out, s)
		}
	}
	return out
}

func (p *Plan) graph() *graph {
	g, _ := p.build()
	return g
}

// States lists every state of the plan, in its order.
func (p *Plan) States() []State {
	g, _ := p.build()
	return g.order
}

// Known reports whether s is a state of the plan.
func (p *Plan) Known(s State) bool {
	g, _ := p.build()
	_, ok := g.nodes[s]
	return ok
}

// Over reports whether an upgrade in s is over, so a new one may start and
// the state may be deleted: the complete state, the abort's end, and the
// states reached after complete.
func (p *Plan) Over(s State) bool {
	g, _ := p.build()
	n, ok := g.nodes[s]
	if !ok {
		return false
	}
	return n.role == roleComplete || (n.role == roleReached && n.section != sectionMain)
}

// InProgress reports whether s is a step under way, which can fail.
func (p *Plan) InProgress(s State) bool { _, ok := p.FailedOf(s); return ok }

// Failed reports whether s is a failed step.
func (p *Plan) Failed(s State) bool {
	g, _ := p.build()
	n, ok := g.nodes[s]
	return ok && n.role == roleFailed
}

// FailedOf returns the failed state of an in-progress state.
func (p *Plan) FailedOf(s State) (State, bool) {
	if st := p.StepOf(s); st != nil && st.Name == s {
		return st.Failed, true
	}
	return "", false
}

// StepOf returns the step s belongs to (its in-progress, failed or reached
// state), or nil for the start and complete states.
func (p *Plan) StepOf(s State) *Step {
	g, _ := p.build()
	if n, ok := g.nodes[s]; ok && n.step != nil {
		st := *n.step
		return &st
	}
	return nil
}

// Allowed returns the states reachable from s in one transition.
func (p *Plan) Allowed(from State) []State {
	g, _ := p.build()
	var out []State
	for _, to := range g.order {
		if g.allowed(from, to) {
			out = append(out, to)
		}
	}
	return out
}

// Position is where a state is in the plan: the 1-based index of its step
// among Steps (0 at the start and in the abort branch, len(Steps)+1 from
// complete on), and the number of steps.
func (p *Plan) Position(s State) (step, steps int) {
	g, _ := p.build()
	if n, ok := g.nodes[s]; ok {
		step = n.index
	}
	return step, len(p.Steps)
}

// HostStatuses lists every host status, "none" first.
func (p *Plan) HostStatuses() []HostStatus {
	out := []HostStatus{HostNone}
	for _, h := range p.HostSteps {
		out = append(out, h.Name, h.Failed, h.Reaches)
	}
	return out
}

// KnownHost reports whether s is a host status of the plan.
func (p *Plan) KnownHost(s HostStatus) bool { return slices.Contains(p.HostStatuses(), s) }

// HostFailedOf returns the failed status of an in-progress host status.
func (p *Plan) HostFailedOf(s HostStatus) (HostStatus, bool) {
	if h := p.hostStep(s); h != nil && h.Name == s {
		return h.Failed, true
	}
	return "", false
}

// HostReachesOf returns the status an in-progress host status ends in.
func (p *Plan) HostReachesOf(s HostStatus) (HostStatus, bool) {
	if h := p.hostStep(s); h != nil && h.Name == s {
		return h.Reaches, true
	}
	return "", false
}

func (p *Plan) hostStep(s HostStatus) *HostStep {
	for i := range p.HostSteps {
		if h := &p.HostSteps[i]; h.Name == s || h.Failed == s || h.Reaches == s {
			return h
		}
	}
	return nil
}

// AllowedHost returns the host statuses reachable from s.
func (p *Plan) AllowedHost(from HostStatus) []HostStatus {
	var out []HostStatus
	for _, to := range p.HostStatuses() {
		if p.allowedHost(from, to) {
			out = append(out, to)
		}
	}
	return out
}

// allowedHost: a host step starts from no status, from a finished step, or
// from its own failure (a retry); it ends or fails only from itself; the
// status is cleared from anything not under way.
func (p *Plan) allowedHost(from, to HostStatus) bool {
	if from == to || !p.KnownHost(from) {
		return false
	}
	_, fromInProgress := p.HostFailedOf(from)
	if to == HostNone {
		return !fromInProgress
	}
	h := p.hostStep(to)
	if h == nil {
		return false
	}
	if to == h.Name {
		finished := false
		for _, o := range p.HostSteps {
			finished = finished || o.Reaches == from
		}
		return from == HostNone || from == h.Failed || finished
	}
	return from == h.Name
}

// Clone returns a deep copy.
func (p *Plan) Clone() *Plan {
	data, _ := json.Marshal(p)
	var out Plan
	_ = json.Unmarshal(data, &out)
	return &out
}

// Diagram draws the plan as text, one step a line.
func (p *Plan) Diagram() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	line := func(indent string, s Step) {
		reaches := ""
		if s.Reaches != "" {
			reaches = "-> " + string(s.Reaches)
		}
		var notes []string
		if s.Optional {
			notes = append(notes, "optional")
		}
		if len(s.After) > 0 {
			notes = append(notes, "after "+join(s.After))
		}
		if s.Reaches == "" {
			notes = append(notes, "the next step starts from it")
		}
		if s.ForEach != "" {
			notes = append(notes, "for each control-plane node")
		}
		note := ""
		if len(notes) > 0 {
			note = "[" + strings.Join(notes, "; ") + "]"
		}
		fmt.Fprintf(w, "%s-> %s\t%s\t(or %s)\t%s\n", indent, s.Name, reaches, s.Failed, note)
	}
	fmt.Fprintf(w, "%s\n", p.Start)
	for _, s := range p.Steps {
		line("  ", s)
	}
	fmt.Fprintf(w, "  -> %s\n", p.Complete)
	for _, s := range p.AfterComplete {
		line("    ", s)
	}
	if p.Abort != nil {
		fmt.Fprintf(w, "any state before %s:\n", p.Complete)
		line("  ", *p.Abort)
	}
	if len(p.HostSteps) > 0 {
		fmt.Fprintln(w, "host steps (each node, whatever the state):")
		for _, h := range p.HostSteps {
			fmt.Fprintf(w, "  %s\t-> %s\t(or %s)\t\n", h.Name, h.Reaches, h.Failed)
		}
	}
	_ = w.Flush()
	// tabwriter pads the last cell too: trim what it leaves at line ends.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// Phase is where an upgrade stands, coarser than its state: the same few
// words whatever the plan, for monitoring to alert on.
type Phase string

// The phases of an upgrade.
const (
	// PhaseWaiting: started, or between steps; no step runs.
	PhaseWaiting Phase = "Waiting"
	// PhaseStepInProgress: a step is under way.
	PhaseStepInProgress Phase = "StepInProgress"
	// PhaseStepFailed: a step failed, and waits for a retry or an abort.
	PhaseStepFailed Phase = "StepFailed"
	// PhaseOver: complete, or aborted.
	PhaseOver Phase = "Over"
)

// Phases lists every phase, in order.
func Phases() []Phase {
	return []Phase{PhaseWaiting, PhaseStepInProgress, PhaseStepFailed, PhaseOver}
}

// Phase says which phase an upgrade in s is in.
func (p *Plan) Phase(s State) Phase {
	switch {
	case p.Over(s):
		return PhaseOver
	case p.Failed(s):
		return PhaseStepFailed
	case p.InProgress(s):
		return PhaseStepInProgress
	}
	return PhaseWaiting
}
