package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
)

// What pause, resume and confirm share: one transition of the record.

// ControlOptions pause, resume or confirm the current rollout: one
// transition of the record, compare-and-swap.
type ControlOptions struct {
	*Flags
	// do makes the transition; past and already say what happened, as
	// "paused" and "was already paused".
	do            func(o *operator.Rollouts, ctx context.Context) (*operator.Change, error)
	past, already string
}

// Complete builds the operator.
func (o *ControlOptions) Complete(*cobra.Command, []string) error { return o.complete(nil) }

// Validate checks the flags.
func (o *ControlOptions) Validate() error { return o.validate() }

// Budget bounds the command by --timeout.
func (o *ControlOptions) Budget() time.Duration { return o.Retry.Timeout }

// Run makes the transition and prints it.
func (o *ControlOptions) Run(ctx context.Context) error {
	ch, err := o.do(o.op, ctx)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("rollout %d %s (%s)\n", ch.Status.ID, o.past, ch.Status.Phase)
	if !ch.Changed {
		line = fmt.Sprintf("rollout %d %s (%s)\n", ch.Status.ID, o.already, ch.Status.Phase)
	}
	return o.follow(ctx, ch, line, false)
}

// newControl builds a sub-verb of ControlOptions.
func newControl(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams, cmd *cobra.Command, o *ControlOptions) *cobra.Command {
	o.Flags = NewFlags(cluster, streams)
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return cmdutil.Run(cmd.Context(), o, cmd, args)
	}
	o.addFlags(cmd)
	return cmd
}
