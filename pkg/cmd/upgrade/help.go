package upgrade

import (
	"strings"

	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// stateDiagram is the default plan, drawn for help texts.
func stateDiagram() string {
	p, err := upgradestate.Builtin(upgradestate.DefaultPlan)
	if err != nil {
		return ""
	}
	return "The default plan, " + p.Name + " ('kubectl kubeadmcfg upgrade-plan show NAME' prints the others):\n\n" +
		indent(p.Diagram(), "  ") + "\nA step starts from the end of the step before it (past an optional step, also\n" +
		"from where the plan stood before it) or from its own -failed state (a retry)."
}

func indent(text, prefix string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
