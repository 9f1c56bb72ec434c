package upgrade

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// FailOptions forces the step in progress to failed.
type FailOptions struct {
	*Flags
	Reason string
}

// NewCmdUpgradeFail builds upgrade-fail.
func NewCmdUpgradeFail(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &FailOptions{Flags: NewFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:   "upgrade-fail",
		Short: "Force the step in progress to its failed state",
		Long: `Move the upgrade's step in progress to exactly its own -failed state and, in
the same write, every host status in progress to its -failed status, so the
retry is accepted. From a state that is not in progress it exits 4; an
upgrade already failed is left as it is (exit 0).`,
		Example: "  # Fail a stuck upgrade so it can be retried\n  kubectl kubeadmcfg upgrade-fail --reason 'kubeadm upgrade node died on controller-1'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why, recorded with the transition")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete fills the default reason and builds the pipeline.
func (o *FailOptions) Complete(*cobra.Command, []string) error {
	if err := o.complete(); err != nil {
		return err
	}
	if o.Reason == "" {
		o.Reason = "forced to failed by " + o.Retry.Identity
	}
	return nil
}

// Budget bounds the whole command by --timeout.
func (o *FailOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the flags.
func (o *FailOptions) Validate() error { return o.validate() }

// Run fails the step.
func (o *FailOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
		return rec.Fail(o.clock(), upgradestate.BoundReason(o.Reason))
	}))
}
