package upgrade

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/internal/lazyregexp"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// Checks of a plan before an upgrade follows it.

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
	stateName = lazyregexp.New(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	nodeName  = stateName
	planName  = lazyregexp.New(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// maxStateName bounds a state's name.
const maxStateName = 253

// CheckStateName checks the spelling of a state or host status name, which
// commands can do before they know the plan.
func CheckStateName(name string) error {
	if !stateName().MatchString(name) || len(name) > maxStateName {
		return fmt.Errorf("%q is not a state name (lowercase letters, digits, '-' and '.')", name)
	}
	return nil
}

// CheckNodeName checks a node's name.
func CheckNodeName(name string) error {
	if !nodeName().MatchString(name) || len(name) > 253 {
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
	if !planName().MatchString(p.Name) {
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
	kubelets := 0
	for _, s := range p.allSteps() {
		if s.ForEach != "" {
			add("step %s is a template (forEach); instantiate the plan first", s.Name)
		}
		if s.NodeIndex < 0 || s.NodeIndex > 0 && s.Work != WorkControlPlane {
			add("step %s: nodeIndex names the node whose %s work a step is: 1 or more, with work %s", s.Name, WorkControlPlane, WorkControlPlane)
		}
		switch s.Work {
		case "":
		case WorkControlPlane:
			if s.Reaches == "" {
				add("step %s is %s work and must reach a state", s.Name, s.Work)
			}
		case WorkKubelets:
			kubelets++
			if s.Reaches != "" || len(p.HostSteps) == 0 {
				add("step %s is %s work: a phase whose work is done per host (no reaches), with host steps", s.Name, s.Work)
			}
		default:
			add("step %s: work must be %s or %s, not %q", s.Name, WorkControlPlane, WorkKubelets, s.Work)
		}
		for _, a := range s.After {
			if _, ok := g.nodes[a]; !ok {
				add("step %s starts after %s, which is not a state of the plan", s.Name, a)
			}
		}
	}
	if kubelets > 1 {
		add("%d steps are %s work; a plan has at most one", kubelets, WorkKubelets)
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
