package upgrade

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// SetOptions moves the upgrade to a state.
type SetOptions struct {
	*Flags
	State, Expect, Reason string
	Force                 bool
}

// NewCmdUpgradeSet builds upgrade-set.
func NewCmdUpgradeSet(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &SetOptions{Flags: NewFlags(cluster, streams)}
	o.forceHint = true
	cmd := &cobra.Command{
		Use:   "upgrade-set STATE [--expect CURRENT]",
		Short: "Move the upgrade to a state",
		Long: `Move the upgrade to STATE. A transition the upgrade's plan does not allow
exits 4 and lists what is allowed from the current state; --force skips the
rule. --expect CURRENT also exits 4 unless the upgrade is in CURRENT, so a
late report cannot overwrite a state an operator forced. Setting the state
the upgrade is already in changes nothing. A state the plan does not have
exits 2.

` + stateDiagram(),
		Example: "  # Report that the second master is upgraded, unless someone changed the state meanwhile\n" +
			"  kubectl kubeadmcfg upgrade-set upgraded-second-master --expect upgrading-second-master",
		Args: cmdutil.ExactArgs(1, "STATE"),
		ValidArgsFunction: func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeStates(o.Flags)(c, args, s)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Expect, "expect", o.Expect, "Change the state only if it is this one")
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why, recorded with the transition")
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Skip the transition rule")
	_ = cmd.RegisterFlagCompletionFunc("expect", completeStates(o.Flags))
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the state and builds the pipeline.
func (o *SetOptions) Complete(_ *cobra.Command, args []string) error {
	o.State = args[0]
	return o.complete()
}

// Budget bounds the whole command by --timeout.
func (o *SetOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the spelling of the state names and the flags; whether
// the upgrade's plan has them is checked against the stored plan.
func (o *SetOptions) Validate() error {
	if err := upgradestate.CheckStateName(o.State); err != nil {
		return exitcode.Usagef("STATE: %w (see 'kubectl kubeadmcfg upgrade-set --help')", err)
	}
	if o.Expect != "" && upgradestate.CheckStateName(o.Expect) != nil {
		return exitcode.Usagef("--expect: %w", upgradestate.CheckStateName(o.Expect))
	}
	return o.validate()
}

// Run makes the transition.
func (o *SetOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
		if o.Expect != "" && !rec.PlanOf().Known(upgradestate.State(o.Expect)) {
			return false, exitcode.Usagef("unknown --expect state %q in plan %s", o.Expect, rec.PlanOf().Name)
		}
		return rec.Set(o.clock(), upgradestate.State(o.State), upgradestate.State(o.Expect), o.Force, upgradestate.BoundReason(o.Reason))
	}))
}
