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

// HostOptions sets one node's status.
type HostOptions struct {
	*Flags
	Node, Status, Expect string
	Force                bool
}

// NewCmdUpgradeHost builds upgrade-host.
func NewCmdUpgradeHost(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &HostOptions{Flags: NewFlags(cluster, streams)}
	o.forceHint = true
	cmd := &cobra.Command{
		Use:   "upgrade-host NODE STATUS [--expect CURRENT]",
		Short: "Set one node's upgrade status",
		Long: `Set NODE's upgrade status, under the same rules as upgrade-set. The statuses
are the host steps of the upgrade's plan, and none (removes the node's
entry); on the default plan: upgrading-control-plane, upgraded-control-plane,
upgrading-kubelet, upgraded-kubelet, upgrading-etcd, upgraded-etcd, each
in-progress one with a -failed form. A step starts from none, from a
finished step, or from its own -failed status.`,
		Example:           "  # Report that controller-1 started upgrading its control plane\n  kubectl kubeadmcfg upgrade-host controller-1 upgrading-control-plane",
		Args:              cmdutil.ExactArgs(2, "NODE STATUS"),
		ValidArgsFunction: completeNodes(o.Flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Expect, "expect", o.Expect, "Change the status only if it is this one")
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Skip the transition rule")
	_ = cmd.RegisterFlagCompletionFunc("expect", completeHostStatuses(o.Flags))
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the node and status and builds the pipeline.
func (o *HostOptions) Complete(_ *cobra.Command, args []string) error {
	o.Node, o.Status = args[0], args[1]
	return o.complete()
}

// Budget bounds the whole command by --timeout.
func (o *HostOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the spelling of the names and the flags; whether the
// upgrade's plan has the statuses is checked against the stored plan.
func (o *HostOptions) Validate() error {
	if err := upgradestate.CheckStateName(o.Status); err != nil {
		return exitcode.Usagef("STATUS: %w (see 'kubectl kubeadmcfg upgrade-host --help')", err)
	}
	if o.Expect != "" && upgradestate.CheckStateName(o.Expect) != nil {
		return exitcode.Usagef("--expect: %w", upgradestate.CheckStateName(o.Expect))
	}
	if o.Node == "" {
		return exitcode.Usagef("NODE must not be empty")
	}
	if err := upgradestate.CheckNodeName(o.Node); err != nil {
		return exitcode.Usagef("NODE: %w", err)
	}
	return o.validate()
}

// Run sets the status.
func (o *HostOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgradestate.Existing(func(rec *upgradestate.Record) (bool, error) {
		if o.Expect != "" && !rec.PlanOf().KnownHost(upgradestate.HostStatus(o.Expect)) {
			return false, exitcode.Usagef("unknown --expect status %q in plan %s", o.Expect, rec.PlanOf().Name)
		}
		return rec.SetHost(o.clock(), o.Node, upgradestate.HostStatus(o.Status), upgradestate.HostStatus(o.Expect), o.Force)
	}))
}
