package rollout

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
)

// NewCmdPause builds rollout pause.
func NewCmdPause(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return newControl(cluster, streams, &cobra.Command{
		Use:   "pause",
		Short: "Stop the current rollout from starting another node",
		Long: `Pause the current rollout: no node starts until 'rollout resume'. A node in
progress finishes its turn first. A rollout already paused stays so (exit
0); one that is not in progress is refused (exit 4), and with no rollout
recorded the command exits 5.`,
		Example: "  # Hold the rollout after the node in progress\n  kubectl kubeadmcfg rollout pause",
	}, &ControlOptions{past: "paused", already: "was already paused",
		do: func(op *operator.Rollouts, ctx context.Context) (*operator.Change, error) {
			return op.Pause(ctx)
		}})
}
