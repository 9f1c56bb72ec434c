package rollout

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
)

// NewCmdConfirm builds rollout confirm.
func NewCmdConfirm(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return newControl(cluster, streams, &cobra.Command{
		Use:   "confirm",
		Short: "Keep a rollout on trial (--try) before the agents revert it",
		Long: `Confirm a rollout started with --try, once its last node is done and before
its deadline: it succeeds, and no agent reverts it. Without a confirmation
by the deadline the agents put every node and kubeadm-config back. A
rollout already confirmed stays so (exit 0); one not on trial, not yet
done, or already reverted is refused (exit 4), and with no rollout
recorded the command exits 5.`,
		Example: "  # Keep the rollout on trial\n  kubectl kubeadmcfg rollout confirm",
	}, &ControlOptions{past: "confirmed", already: "was already confirmed",
		do: func(op *operator.Rollouts, ctx context.Context) (*operator.Change, error) {
			return op.Confirm(ctx)
		}})
}
