// Package upgrade is the upgrade-* family: upgrade-start, -apply, -resume,
// -set, -host, -fail, -run, -audit, -status, -delete and upgrade-plan. It
// records an upgrade's state and its hosts' statuses under the rules of
// pkg/upgrade (imported as upgradestate), writing through pkg/engine's
// compare-and-swap and renewing pkg/engine's heartbeat Leases while
// upgrade-run runs a step; upgrade-apply and upgrade-resume hand the
// upgrade to the node agents through pkg/operator's Upgrades.
package upgrade

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
)

// NewCmdUpgrade builds the upgrade-* commands.
func NewCmdUpgrade(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) []*cobra.Command {
	return []*cobra.Command{
		NewCmdUpgradeStatus(cluster, streams),
		NewCmdUpgradeStart(cluster, streams),
		NewCmdUpgradeApply(cluster, streams),
		NewCmdUpgradeResume(cluster, streams),
		NewCmdUpgradeSet(cluster, streams),
		NewCmdUpgradeHost(cluster, streams),
		NewCmdUpgradeRun(cluster, streams),
		NewCmdUpgradeFail(cluster, streams),
		NewCmdUpgradeAudit(cluster, streams),
		NewCmdUpgradeDelete(cluster, streams),
		NewCmdUpgradePlan(cluster, streams),
	}
}
