package rollout

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
)

// NewCmdResume builds rollout resume.
func NewCmdResume(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return newControl(cluster, streams, &cobra.Command{
		Use:   "resume",
		Short: "Let a paused rollout go on",
		Long: `Resume a paused rollout, paused by 'rollout pause' or by its --canary: the
next node starts. The canary has done its work: no later node pauses the
rollout again. A rollout in progress stays so (exit 0); one that is not
paused is refused (exit 4), and with no rollout recorded the command exits
5. Follow it with 'rollout status -w'.`,
		Example: "  # Go on after the canary, and follow the rest\n  kubectl kubeadmcfg rollout resume && kubectl kubeadmcfg rollout status -w",
	}, &ControlOptions{past: "resumed", already: "was not paused",
		do: func(op *operator.Rollouts, ctx context.Context) (*operator.Change, error) {
			return op.Resume(ctx)
		}})
}
