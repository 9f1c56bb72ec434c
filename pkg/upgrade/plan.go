package upgrade

import (
	"embed"
	"fmt"
	"slices"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/input"
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
	// Node is the node an expanded step is for, and the node whose work a
	// control-plane step is.
	Node string `json:"node,omitempty"`
	// NodeIndex makes a step that is not expanded the work of the
	// control-plane node of that 1-based position (the seed system's first
	// and second masters): Instantiate sets Node from it. An optional step
	// past the last node has none, and is skipped.
	NodeIndex int `json:"nodeIndex,omitempty"`
	// Work is what the step is for the node agents, when upgrade-apply has
	// them carry the upgrade out: WorkControlPlane (Node's kubeadm upgrade)
	// or WorkKubelets (each node's kubelet, one at a time); "" is no node
	// work (optional steps are skipped, the others recorded as passed).
	Work        string `json:"work,omitempty"`
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
// be a template: Instantiate expands and validates it. YAML anchors and
// aliases are read as kubeadm's files are; text of more than 2 MiB, or whose
// aliases expand it past the bound every input has (see internal/input),
// is refused unexpanded.
func ParsePlan(data []byte) (*Plan, error) {
	var p Plan
	err := input.UnmarshalStrict(data, &p)
	if input.Refused(err) {
		return nil, exitcode.Invalidf("the plan cannot be used: %w", err)
	}
	if err != nil {
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

// AssignNodes names, for the node agents, the node whose work each step
// with a NodeIndex is: the control-plane node at that position of nodes. An
// optional step past the last node stays without one (the agents skip it);
// a step that is not optional is refused (exit 2). upgrade-apply calls it
// on the instantiated plan.
func (p *Plan) AssignNodes(nodes []string) error {
	for i := range p.Steps {
		s := &p.Steps[i]
		switch {
		case s.NodeIndex == 0:
		case s.NodeIndex <= len(nodes):
			s.Node = nodes[s.NodeIndex-1]
		case !s.Optional:
			return exitcode.Usagef("step %s of plan %s is the work of control-plane node %d, and there are %d", s.Name, p.Name, s.NodeIndex, len(nodes))
		}
	}
	if len(p.ControlPlaneNodes) == 0 {
		p.ControlPlaneNodes = slices.Clone(nodes)
	}
	return nil
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
			if !nodeName().MatchString(n) || len(n) > 253 {
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
