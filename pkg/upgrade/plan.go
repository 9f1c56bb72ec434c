package upgrade

import (
	"embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// A Plan is the route an upgrade follows: an ordered list of steps, each
// with its in-progress state, its -failed state and the state it reaches,
// then the complete state, optional steps after it, an abort branch, and the
// per-host steps every node goes through. The plan an upgrade starts with is
// stored with its state, so every node and every tool checks transitions
// against the same rules, and an upgrade keeps its plan even if the plugin is
// updated while it runs.
//
// Transitions follow from the order: a step may start from the state the
// step before it ends in (its reached state, or its in-progress state when it
// reaches none), or from its own -failed state (a retry); when the step
// before it is optional, also from where the plan stood before that one. A step's
// end and failure come only from the step itself. After lists states a step
// may start from instead of the step before it (a branch).
type Plan struct {
	APIVersion  string `json:"apiVersion"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Start is the state upgrade-start records (default upgrade-started).
	Start State `json:"start"`
	// Complete is the state that ends the upgrade (default upgrade-complete).
	Complete State `json:"complete"`
	// ControlPlaneNodes are the nodes the ForEach steps were expanded for,
	// in order; set when the plan is instantiated for an upgrade.
	ControlPlaneNodes []string `json:"controlPlaneNodes,omitempty"`
	Steps             []Step   `json:"steps"`
	// AfterComplete are steps that may follow Complete, in order (the seed
	// system's post-updating-apps). Complete and their reached states count
	// as over: a new upgrade may start.
	AfterComplete []Step `json:"afterComplete,omitempty"`
	// Abort is the branch any state before Complete may take.
	Abort *Step `json:"abort,omitempty"`
	// HostSteps are the statuses each node goes through, whatever the state.
	HostSteps []HostStep `json:"hostSteps,omitempty"`
}

// Step is one stage of a plan.
type Step struct {
	// Name is the step's in-progress state.
	Name State `json:"name"`
	// Failed is its failed state (default: Name-failed).
	Failed State `json:"failed"`
	// Reaches is the state it ends in. Empty makes the step a phase whose
	// work is done per host: the next step starts from Name itself.
	Reaches State `json:"reaches,omitempty"`
	// Optional steps may be skipped: the step after may also start from
	// where the plan stood before this one.
	Optional bool `json:"optional,omitempty"`
	// After, when set, lists the states this step may start from instead of
	// the end of the step before it.
	After []State `json:"after,omitempty"`
	// ForEach "control-plane-node" makes the step a template, expanded at
	// upgrade-start into one step per control-plane node, in order, with
	// {node} in its names replaced by the node's name.
	ForEach string `json:"forEach,omitempty"`
	// Node is the node an expanded step is for.
	Node        string `json:"node,omitempty"`
	Description string `json:"description,omitempty"`
}

// HostStep is a status every node goes through: in progress, failed, done.
type HostStep struct {
	Name        HostStatus `json:"name"`
	Failed      HostStatus `json:"failed"`
	Reaches     HostStatus `json:"reaches"`
	Description string     `json:"description,omitempty"`
}

// Plan file identifiers.
const (
	PlanAPIVersion = "kubeadmcfg.io/v1alpha1"
	PlanKind       = "UpgradePlan"
)

// ForEachControlPlaneNode is the one ForEach value: a step per control-plane node.
const ForEachControlPlaneNode = "control-plane-node"

// NodePlaceholder is replaced by the node's name in an expanded step.
const NodePlaceholder = "{node}"

// DefaultPlan is the plan of upgrade-start without --plan, and of an upgrade
// recorded before plans existed.
const DefaultPlan = "starlingx"

// MaxPlanBytes bounds a plan as stored (compact JSON), so that it and the
// state fit the API server's 256 KiB limit on annotations.
const MaxPlanBytes = 64 << 10

//go:embed plans/*.yaml
var builtinPlans embed.FS

// BuiltinPlans lists the names of the plans the plugin knows.
func BuiltinPlans() []string { return []string{"kubeadm", "starlingx"} }

// Builtin returns a built-in plan by name, not yet instantiated.
func Builtin(name string) (*Plan, error) {
	if !slices.Contains(BuiltinPlans(), name) {
		return nil, exitcode.NotFoundf("no built-in plan %q (built-in: %s)", name, strings.Join(BuiltinPlans(), ", "))
	}
	data, err := builtinPlans.ReadFile("plans/" + name + ".yaml")
	if err != nil {
		return nil, exitcode.Failuref("read the built-in plan %s: %w", name, err)
	}
	return ParsePlan(data)
}

// ParsePlan reads a plan from YAML or JSON, strictly (unknown fields and
// duplicate keys are errors), and fills the defaults. The result may still
// be a template: Instantiate expands and validates it.
func ParsePlan(data []byte) (*Plan, error) {
	var p Plan
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, exitcode.Invalidf("not a plan: %w", err)
	}
	if p.APIVersion != "" && p.APIVersion != PlanAPIVersion {
		return nil, exitcode.Invalidf("plan apiVersion must be %s, not %q", PlanAPIVersion, p.APIVersion)
	}
	if p.Kind != "" && p.Kind != PlanKind {
		return nil, exitcode.Invalidf("plan kind must be %s, not %q", PlanKind, p.Kind)
	}
	p.defaults()
	return &p, nil
}

func (p *Plan) defaults() {
	p.APIVersion, p.Kind = PlanAPIVersion, PlanKind
	if p.Start == "" {
		p.Start = Started
	}
	if p.Complete == "" {
		p.Complete = Complete
	}
	fill := func(s *Step) {
		if s.Failed == "" && s.Name != "" {
			s.Failed = s.Name + "-failed"
		}
	}
	for i := range p.Steps {
		fill(&p.Steps[i])
	}
	for i := range p.AfterComplete {
		fill(&p.AfterComplete[i])
	}
	if p.Abort != nil {
		fill(p.Abort)
	}
	for i := range p.HostSteps {
		if h := &p.HostSteps[i]; h.Failed == "" && h.Name != "" {
			h.Failed = h.Name + "-failed"
		}
	}
}

// IsTemplate reports whether the plan has steps to expand per
// control-plane node.
func (p *Plan) IsTemplate() bool {
	for _, s := range append(slices.Clone(p.Steps), p.AfterComplete...) {
		if s.ForEach != "" {
			return true
		}
	}
	return false
}

// Instantiate returns the plan an upgrade follows: every ForEach step
// expanded for the control-plane nodes, in the order given, and the result
// validated. nodes are ignored by a plan without ForEach steps.
func (p *Plan) Instantiate(nodes []string) (*Plan, error) {
	out := *p
	out.Steps, out.AfterComplete, out.ControlPlaneNodes = nil, nil, nil
	var problems []string
	if p.IsTemplate() {
		if len(nodes) == 0 {
			return nil, exitcode.Usagef("plan %s has a step for each control-plane node, and no nodes were given", p.Name)
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			if !nodeName.MatchString(n) || len(n) > 253 {
				problems = append(problems, fmt.Sprintf("control-plane node %q is not a node name", n))
			}
			if seen[n] {
				problems = append(problems, fmt.Sprintf("control-plane node %q is given twice", n))
			}
			seen[n] = true
		}
		out.ControlPlaneNodes = slices.Clone(nodes)
	}
	expand := func(steps []Step) []Step {
		var res []Step
		for _, s := range steps {
			switch s.ForEach {
			case "":
				res = append(res, s)
			case ForEachControlPlaneNode:
				if !strings.Contains(string(s.Name), NodePlaceholder) {
					problems = append(problems, fmt.Sprintf("step %s is for each control-plane node but its name has no %s", s.Name, NodePlaceholder))
				}
				for _, n := range nodes {
					e := s
					e.ForEach, e.Node = "", n
					sub := func(st State) State { return State(strings.ReplaceAll(string(st), NodePlaceholder, n)) }
					e.Name, e.Failed, e.Reaches = sub(s.Name), sub(s.Failed), sub(s.Reaches)
					e.Description = strings.ReplaceAll(s.Description, NodePlaceholder, n)
					e.After = nil
					for _, a := range s.After {
						e.After = append(e.After, sub(a))
					}
					res = append(res, e)
				}
			default:
				problems = append(problems, fmt.Sprintf("step %s: forEach must be %s, not %q", s.Name, ForEachControlPlaneNode, s.ForEach))
			}
		}
		return res
	}
	out.Steps, out.AfterComplete = expand(p.Steps), expand(p.AfterComplete)
	if len(problems) > 0 {
		return nil, planError(p.Name, problems)
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return &out, nil
}

// Check validates a plan that may still be a template: a template is
// checked as if expanded for two control-plane nodes, node-1 and node-2.
func (p *Plan) Check() error {
	if !p.IsTemplate() {
		return p.Validate()
	}
	_, err := p.Instantiate([]string{"node-1", "node-2"})
	return err
}

// stateName is what a state or host status may be called: lowercase
// letters, digits, '-' and '.', as node names are.
var (
	stateName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	nodeName  = stateName
	planName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// maxStateName bounds a state's name.
const maxStateName = 253

// CheckStateName checks the spelling of a state or host status name, which
// commands can do before they know the plan.
func CheckStateName(name string) error {
	if !stateName.MatchString(name) || len(name) > maxStateName {
		return fmt.Errorf("%q is not a state name (lowercase letters, digits, '-' and '.')", name)
	}
	return nil
}

// CheckNodeName checks a node's name.
func CheckNodeName(name string) error {
	if !nodeName.MatchString(name) || len(name) > 253 {
		return fmt.Errorf("%q is not a node name (lowercase letters, digits, '-' and '.')", name)
	}
	return nil
}

// Validate checks an instantiated plan: names well formed and unique, -failed
// states only for in-progress states, every reference known, every state
// reachable from the start, and the stored size bounded. It reports every
// problem in one error (exit 3).
func (p *Plan) Validate() error {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if !planName.MatchString(p.Name) {
		add("name %q must be lowercase letters, digits and '-'", p.Name)
	}
	if len(p.Steps) == 0 {
		add("no steps")
	}
	g, dup := p.build()
	for _, s := range dup {
		add("state %s is named twice", s)
	}
	for _, s := range g.order {
		n := g.nodes[s]
		if CheckStateName(string(s)) != nil {
			add("%q is not a state name (lowercase letters, digits, '-' and '.')", s)
		}
		failedName := strings.HasSuffix(string(s), "-failed")
		switch {
		case n.role == roleFailed && !failedName:
			add("failed state %s must end in -failed", s)
		case n.role != roleFailed && failedName:
			add("%s ends in -failed but is the %s; -failed states are only for steps in progress", s, n.role)
		}
	}
	for _, s := range p.AfterComplete {
		if s.Reaches == "" {
			add("step %s after %s must reach a state", s.Name, p.Complete)
		}
	}
	if p.Abort != nil && p.Abort.Reaches == "" {
		add("abort step %s must reach a state", p.Abort.Name)
	}
	for _, s := range p.allSteps() {
		if s.ForEach != "" {
			add("step %s is a template (forEach); instantiate the plan first", s.Name)
		}
		for _, a := range s.After {
			if _, ok := g.nodes[a]; !ok {
				add("step %s starts after %s, which is not a state of the plan", s.Name, a)
			}
		}
	}
	hosts := map[HostStatus]bool{}
	for _, h := range p.HostSteps {
		for _, st := range []HostStatus{h.Name, h.Failed, h.Reaches} {
			switch {
			case st == "":
				add("host step %s needs a name, a failed and a reached status", h.Name)
			case st == HostNone:
				add("host status %q is reserved (it removes a host's entry)", HostNone)
			case CheckStateName(string(st)) != nil:
				add("%q is not a host status name (lowercase letters, digits, '-' and '.')", st)
			case hosts[st]:
				add("host status %s is named twice", st)
			}
			hosts[st] = true
		}
		if !strings.HasSuffix(string(h.Failed), "-failed") {
			add("failed host status %s must end in -failed", h.Failed)
		}
		for _, st := range []HostStatus{h.Name, h.Reaches} {
			if strings.HasSuffix(string(st), "-failed") {
				add("host status %s ends in -failed but is not the failure of a host step", st)
			}
		}
	}
	if len(dup) == 0 {
		if unreachable := g.unreachable(p); len(unreachable) > 0 {
			add("unreachable from %s: %s", p.Start, join(unreachable))
		}
	}
	if data, err := json.Marshal(p); err == nil && len(data) > MaxPlanBytes {
		add("it takes %d bytes stored, over the limit of %d (fewer steps or nodes, shorter descriptions)", len(data), MaxPlanBytes)
	}
	if len(problems) > 0 {
		return planError(p.Name, problems)
	}
	return nil
}

func planError(name string, problems []string) error {
	if name == "" {
		name = "(unnamed)"
	}
	return exitcode.Invalidf("plan %s is invalid: %s", name, strings.Join(problems, "; "))
}

func (p *Plan) allSteps() []Step {
	out := slices.Clone(p.Steps)
	out = append(out, p.AfterComplete...)
	if p.Abort != nil {
		out = append(out, *p.Abort)
	}
	return out
}

// role is what a state is in its plan.
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
