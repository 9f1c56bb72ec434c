package cmd

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// The commands that move the upgrade or a host: upgrade-start, upgrade-set,
// upgrade-host and upgrade-fail.

// UpgradeStartOptions records the start of an upgrade.
type UpgradeStartOptions struct {
	*UpgradeFlags
	To, From, Reason string

	kubeadmConfig *engine.Engine // reads the live kubernetesVersion when --from is not given
}

// NewCmdUpgradeStart builds upgrade-start.
func NewCmdUpgradeStart(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeStartOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:   "upgrade-start --to VERSION [--from VERSION]",
		Short: "Record the start of an upgrade",
		Long: `Record the start of an upgrade to --to, in state upgrade-started, creating the
state ConfigMap if needed. Refused with exit 4 while an upgrade exists that
is not complete or aborted. --from defaults to the kubernetesVersion of the
live ClusterConfiguration.

` + stateDiagram,
		Example: "  # Start an upgrade to v1.37.2\n  kubectl kubeadmcfg upgrade-start --to v1.37.2",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.To, "to", o.To, "The Kubernetes version the upgrade goes to")
	cmd.Flags().StringVar(&o.From, "from", o.From, "The Kubernetes version the upgrade starts from (default: the live kubernetesVersion)")
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why, recorded with the transition")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete builds the pipeline, and a reader of kubeadm-config for --from.
func (o *UpgradeStartOptions) Complete(*cobra.Command, []string) error {
	if err := o.complete(); err != nil {
		return err
	}
	if o.From == "" {
		c, err := o.Cluster.Clients()
		if err != nil {
			return err
		}
		o.kubeadmConfig = engine.New(c.Client, o.Cluster.Target(engine.DefaultKey), engine.Options{Timeout: o.Retry.Timeout})
	}
	return nil
}

// Validate checks the versions and flags.
func (o *UpgradeStartOptions) Validate() error {
	if upgrade.CheckVersion(o.To) != nil {
		return exitcode.Usagef("--to must be a Kubernetes version such as v1.37.2, not %q", o.To)
	}
	if o.From != "" && upgrade.CheckVersion(o.From) != nil {
		return exitcode.Usagef("--from must be a Kubernetes version such as v1.37.2, not %q", o.From)
	}
	return o.validate()
}

// Run records the start.
func (o *UpgradeStartOptions) Run(ctx context.Context) error {
	from := o.From
	if from == "" {
		from = o.liveVersion(ctx)
	}
	return o.write(ctx, func(rec *upgrade.Record) (*upgrade.Record, bool, error) {
		next, err := upgrade.Start(rec, o.clock(), from, o.To, o.Reason)
		return next, err == nil, err
	})
}

// liveVersion reads kubernetesVersion from kubeadm-config, or "" when it
// cannot.
func (o *UpgradeStartOptions) liveVersion(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, o.Retry.Timeout)
	defer cancel()
	doc, err := o.kubeadmConfig.Document(ctx)
	if err != nil {
		return ""
	}
	if parsed, err := clusterconfig.Parse([]byte(doc)); err == nil {
		return parsed.KubernetesVersion()
	}
	return ""
}

// UpgradeSetOptions moves the upgrade to a state.
type UpgradeSetOptions struct {
	*UpgradeFlags
	State, Expect, Reason string
	Force                 bool
}

// NewCmdUpgradeSet builds upgrade-set.
func NewCmdUpgradeSet(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeSetOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:   "upgrade-set STATE [--expect CURRENT]",
		Short: "Move the upgrade to a state",
		Long: `Move the upgrade to STATE. A transition the state machine does not allow
exits 4 and lists what is allowed from the current state; --force skips the
rule. --expect CURRENT also exits 4 unless the upgrade is in CURRENT, so a
late report cannot overwrite a state an operator forced. Setting the state
the upgrade is already in changes nothing. An unknown state exits 2.

` + stateDiagram,
		Example: "  # Report that the second master is upgraded, unless someone changed the state meanwhile\n" +
			"  kubectl kubeadmcfg upgrade-set upgraded-second-master --expect upgrading-second-master",
		Args: exactArgs(1, "STATE"),
		ValidArgsFunction: func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeStates(c, args, s)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Expect, "expect", o.Expect, "Change the state only if it is this one")
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why, recorded with the transition")
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Skip the transition rule")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the state and builds the pipeline.
func (o *UpgradeSetOptions) Complete(_ *cobra.Command, args []string) error {
	o.State = args[0]
	return o.complete()
}

// Validate checks the state names and flags.
func (o *UpgradeSetOptions) Validate() error {
	if !upgrade.Known(upgrade.State(o.State)) {
		return exitcode.Usagef("unknown state %q (see 'kubectl kubeadmcfg upgrade-set --help')", o.State)
	}
	if o.Expect != "" && !upgrade.Known(upgrade.State(o.Expect)) {
		return exitcode.Usagef("unknown --expect state %q", o.Expect)
	}
	return o.validate()
}

// Run makes the transition.
func (o *UpgradeSetOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		return rec.Set(o.clock(), upgrade.State(o.State), upgrade.State(o.Expect), o.Force, o.Reason)
	}))
}

// UpgradeHostOptions sets one node's status.
type UpgradeHostOptions struct {
	*UpgradeFlags
	Node, Status, Expect string
	Force                bool
}

// NewCmdUpgradeHost builds upgrade-host.
func NewCmdUpgradeHost(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeHostOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:   "upgrade-host NODE STATUS [--expect CURRENT]",
		Short: "Set one node's upgrade status",
		Long: `Set NODE's upgrade status, under the same rules as upgrade-set. Statuses:
upgrading-control-plane, upgraded-control-plane, upgrading-kubelet,
upgraded-kubelet, upgrading-etcd, upgraded-etcd, each in-progress one with a
-failed form, and none (removes the node's entry). A step starts from none,
from a finished step, or from its own -failed status.`,
		Example:           "  # Report that controller-1 started upgrading its control plane\n  kubectl kubeadmcfg upgrade-host controller-1 upgrading-control-plane",
		Args:              exactArgs(2, "NODE STATUS"),
		ValidArgsFunction: completeNodes(o.UpgradeFlags),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Expect, "expect", o.Expect, "Change the status only if it is this one")
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Skip the transition rule")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the node and status and builds the pipeline.
func (o *UpgradeHostOptions) Complete(_ *cobra.Command, args []string) error {
	o.Node, o.Status = args[0], args[1]
	return o.complete()
}

// Validate checks the names and flags.
func (o *UpgradeHostOptions) Validate() error {
	if !upgrade.KnownHost(upgrade.HostStatus(o.Status)) {
		return exitcode.Usagef("unknown host status %q (see 'kubectl kubeadmcfg upgrade-host --help')", o.Status)
	}
	if o.Expect != "" && !upgrade.KnownHost(upgrade.HostStatus(o.Expect)) {
		return exitcode.Usagef("unknown --expect status %q", o.Expect)
	}
	if o.Node == "" {
		return exitcode.Usagef("NODE must not be empty")
	}
	return o.validate()
}

// Run sets the status.
func (o *UpgradeHostOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		return rec.SetHost(o.clock(), o.Node, upgrade.HostStatus(o.Status), upgrade.HostStatus(o.Expect), o.Force)
	}))
}

// UpgradeFailOptions forces the step in progress to failed.
type UpgradeFailOptions struct {
	*UpgradeFlags
	Reason string
}

// NewCmdUpgradeFail builds upgrade-fail.
func NewCmdUpgradeFail(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeFailOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams)}
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
			return run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why, recorded with the transition")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete fills the default reason and builds the pipeline.
func (o *UpgradeFailOptions) Complete(*cobra.Command, []string) error {
	if err := o.complete(); err != nil {
		return err
	}
	if o.Reason == "" {
		o.Reason = "forced to failed by " + o.Retry.Identity
	}
	return nil
}

// Validate checks the flags.
func (o *UpgradeFailOptions) Validate() error { return o.validate() }

// Run fails the step.
func (o *UpgradeFailOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		return rec.Fail(o.clock(), o.Reason)
	}))
}
