package cmd

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
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
	// Plan is a built-in plan's name or a plan file ("-" for stdin).
	Plan              string
	ControlPlaneNodes []string

	plan          *upgrade.Plan  // read by Complete, instantiated by Run
	kubeadmConfig *engine.Engine // reads the live kubernetesVersion when --from is not given
}

// NewCmdUpgradeStart builds upgrade-start.
func NewCmdUpgradeStart(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeStartOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams), Plan: upgrade.DefaultPlan}
	cmd := &cobra.Command{
		Use:   "upgrade-start --to VERSION [--from VERSION] [--plan NAME|FILE]",
		Short: "Record the start of an upgrade",
		Long: `Record the start of an upgrade to --to, in the start state of its plan,
creating the state ConfigMap if needed. Refused with exit 4 while an upgrade
exists that is not over (complete or aborted). --from defaults to the
kubernetesVersion of the live ClusterConfiguration.

The upgrade follows --plan: a built-in plan (starlingx, the default, or
kubeadm) or a plan file (- for stdin), validated here: a bad plan exits 3
and nothing is written. The plan is stored with the state, so every node
checks transitions against the same rules, even if the plugin is updated
during the upgrade. A plan with a step for each control-plane node (kubeadm)
is expanded for --control-plane-nodes, in the order given, or else for the
cluster's nodes labelled node-role.kubernetes.io/control-plane, sorted by
name.

` + stateDiagram(),
		Example: "  # Start an upgrade to v1.37.2 on the default plan\n  kubectl kubeadmcfg upgrade-start --to v1.37.2\n\n" +
			"  # Follow kubeadm's order on three control-plane nodes, the first upgraded first\n" +
			"  kubectl kubeadmcfg upgrade-start --to v1.37.2 --plan kubeadm --control-plane-nodes cp-0,cp-1,cp-2\n\n" +
			"  # Follow a plan of your own\n  kubectl kubeadmcfg upgrade-start --to v1.37.2 --plan ./my-plan.yaml",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.To, "to", o.To, "The Kubernetes version the upgrade goes to")
	cmd.Flags().StringVar(&o.From, "from", o.From, "The Kubernetes version the upgrade starts from (default: the live kubernetesVersion)")
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why, recorded with the transition")
	cmd.Flags().StringVar(&o.Plan, "plan", o.Plan, "The plan the upgrade follows: a built-in plan (starlingx, kubeadm) or a plan file (- for stdin)")
	cmd.Flags().StringSliceVar(&o.ControlPlaneNodes, "control-plane-nodes", o.ControlPlaneNodes,
		"For a plan with a step per control-plane node: the nodes, in order (default: the cluster's control-plane nodes, by name)")
	_ = cmd.RegisterFlagCompletionFunc("plan", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return upgrade.BuiltinPlans(), cobra.ShellCompDirectiveDefault
	})
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the plan, builds the pipeline, and a reader of
// kubeadm-config for --from.
func (o *UpgradeStartOptions) Complete(cmd *cobra.Command, _ []string) error {
	plan, err := loadPlan(o.Plan, cmd.InOrStdin())
	if err != nil {
		return err
	}
	o.plan = plan
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

// Budget bounds the whole command: the reads of kubeadm-config and of the
// nodes, and the write.
func (o *UpgradeStartOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the versions and flags.
func (o *UpgradeStartOptions) Validate() error {
	if upgrade.CheckVersion(o.To) != nil {
		return exitcode.Usagef("--to must be a Kubernetes version such as v1.37.2, not %q", o.To)
	}
	if o.From != "" && upgrade.CheckVersion(o.From) != nil {
		return exitcode.Usagef("--from must be a Kubernetes version such as v1.37.2, not %q", o.From)
	}
	for _, n := range o.ControlPlaneNodes {
		if err := upgrade.CheckNodeName(n); err != nil {
			return exitcode.Usagef("--control-plane-nodes: %w", err)
		}
	}
	return o.validate()
}

// Run instantiates the plan for the control-plane nodes and records the
// start.
func (o *UpgradeStartOptions) Run(ctx context.Context) error {
	nodes := o.ControlPlaneNodes
	if o.plan.IsTemplate() && len(nodes) == 0 {
		var err error
		if nodes, err = o.engine.ControlPlaneNodes(ctx); err != nil {
			return exitcode.WithHint(err, "or name them with --control-plane-nodes")
		}
		if len(nodes) == 0 {
			return exitcode.NotFoundf("plan %s has a step for each control-plane node, and no node is labelled %s; name them with --control-plane-nodes",
				o.plan.Name, engine.ControlPlaneLabel)
		}
	}
	plan, err := o.plan.Instantiate(nodes)
	if err != nil {
		return err
	}
	from := o.From
	if from == "" {
		from = o.liveVersion(ctx)
	}
	return o.write(ctx, func(rec *upgrade.Record) (*upgrade.Record, bool, error) {
		next, err := upgrade.Start(rec, plan, o.clock(), from, o.To, upgrade.BoundReason(o.Reason))
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
func NewCmdUpgradeSet(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeSetOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams)}
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
			return completeStates(o.UpgradeFlags)(c, args, s)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Expect, "expect", o.Expect, "Change the state only if it is this one")
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why, recorded with the transition")
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Skip the transition rule")
	_ = cmd.RegisterFlagCompletionFunc("expect", completeStates(o.UpgradeFlags))
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the state and builds the pipeline.
func (o *UpgradeSetOptions) Complete(_ *cobra.Command, args []string) error {
	o.State = args[0]
	return o.complete()
}

// Budget bounds the whole command by --timeout.
func (o *UpgradeSetOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the spelling of the state names and the flags; whether
// the upgrade's plan has them is checked against the stored plan.
func (o *UpgradeSetOptions) Validate() error {
	if err := upgrade.CheckStateName(o.State); err != nil {
		return exitcode.Usagef("STATE: %w (see 'kubectl kubeadmcfg upgrade-set --help')", err)
	}
	if o.Expect != "" && upgrade.CheckStateName(o.Expect) != nil {
		return exitcode.Usagef("--expect: %w", upgrade.CheckStateName(o.Expect))
	}
	return o.validate()
}

// Run makes the transition.
func (o *UpgradeSetOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		if o.Expect != "" && !rec.PlanOf().Known(upgrade.State(o.Expect)) {
			return false, exitcode.Usagef("unknown --expect state %q in plan %s", o.Expect, rec.PlanOf().Name)
		}
		return rec.Set(o.clock(), upgrade.State(o.State), upgrade.State(o.Expect), o.Force, upgrade.BoundReason(o.Reason))
	}))
}

// UpgradeHostOptions sets one node's status.
type UpgradeHostOptions struct {
	*UpgradeFlags
	Node, Status, Expect string
	Force                bool
}

// NewCmdUpgradeHost builds upgrade-host.
func NewCmdUpgradeHost(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeHostOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams)}
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
		ValidArgsFunction: completeNodes(o.UpgradeFlags),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Expect, "expect", o.Expect, "Change the status only if it is this one")
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Skip the transition rule")
	_ = cmd.RegisterFlagCompletionFunc("expect", completeHostStatuses(o.UpgradeFlags))
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the node and status and builds the pipeline.
func (o *UpgradeHostOptions) Complete(_ *cobra.Command, args []string) error {
	o.Node, o.Status = args[0], args[1]
	return o.complete()
}

// Budget bounds the whole command by --timeout.
func (o *UpgradeHostOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the spelling of the names and the flags; whether the
// upgrade's plan has the statuses is checked against the stored plan.
func (o *UpgradeHostOptions) Validate() error {
	if err := upgrade.CheckStateName(o.Status); err != nil {
		return exitcode.Usagef("STATUS: %w (see 'kubectl kubeadmcfg upgrade-host --help')", err)
	}
	if o.Expect != "" && upgrade.CheckStateName(o.Expect) != nil {
		return exitcode.Usagef("--expect: %w", upgrade.CheckStateName(o.Expect))
	}
	if o.Node == "" {
		return exitcode.Usagef("NODE must not be empty")
	}
	if err := upgrade.CheckNodeName(o.Node); err != nil {
		return exitcode.Usagef("NODE: %w", err)
	}
	return o.validate()
}

// Run sets the status.
func (o *UpgradeHostOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		if o.Expect != "" && !rec.PlanOf().KnownHost(upgrade.HostStatus(o.Expect)) {
			return false, exitcode.Usagef("unknown --expect status %q in plan %s", o.Expect, rec.PlanOf().Name)
		}
		return rec.SetHost(o.clock(), o.Node, upgrade.HostStatus(o.Status), upgrade.HostStatus(o.Expect), o.Force)
	}))
}

// UpgradeFailOptions forces the step in progress to failed.
type UpgradeFailOptions struct {
	*UpgradeFlags
	Reason string
}

// NewCmdUpgradeFail builds upgrade-fail.
func NewCmdUpgradeFail(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
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
			return cmdutil.Run(cmd.Context(), o, cmd, args)
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

// Budget bounds the whole command by --timeout.
func (o *UpgradeFailOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the flags.
func (o *UpgradeFailOptions) Validate() error { return o.validate() }

// Run fails the step.
func (o *UpgradeFailOptions) Run(ctx context.Context) error {
	return o.write(ctx, upgrade.Existing(func(rec *upgrade.Record) (bool, error) {
		return rec.Fail(o.clock(), upgrade.BoundReason(o.Reason))
	}))
}
