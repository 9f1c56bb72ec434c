// Package upgrade is the upgrade-* family: upgrade-start, -set, -host,
// -fail, -run, -audit, -status, -delete and upgrade-plan. It records an
// upgrade's state and its hosts' statuses under the rules of pkg/upgrade
// (imported as upgradestate), writing through pkg/engine's compare-and-swap
// and renewing pkg/engine's heartbeat Leases while upgrade-run runs a step.
package upgrade

import (
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// NewCmdUpgrade builds the upgrade-* commands.
func NewCmdUpgrade(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) []*cobra.Command {
	return []*cobra.Command{
		NewCmdUpgradeStatus(cluster, streams),
		NewCmdUpgradeStart(cluster, streams),
		NewCmdUpgradeSet(cluster, streams),
		NewCmdUpgradeHost(cluster, streams),
		NewCmdUpgradeRun(cluster, streams),
		NewCmdUpgradeFail(cluster, streams),
		NewCmdUpgradeAudit(cluster, streams),
		NewCmdUpgradeDelete(cluster, streams),
		NewCmdUpgradePlan(cluster, streams),
	}
}

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
