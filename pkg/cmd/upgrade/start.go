package upgrade

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/clusterconfig"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// StartOptions records the start of an upgrade.
type StartOptions struct {
	*Flags
	To, From, Reason string
	// Plan is a built-in plan's name or a plan file ("-" for stdin).
	Plan              string
	ControlPlaneNodes []string

	plan          *upgradestate.Plan // read by Complete, instantiated by Run
	kubeadmConfig *engine.Engine     // reads the live kubernetesVersion when --from is not given
}

// NewCmdUpgradeStart builds upgrade-start.
func NewCmdUpgradeStart(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StartOptions{Flags: NewFlags(cluster, streams), Plan: upgradestate.DefaultPlan}
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
		return upgradestate.BuiltinPlans(), cobra.ShellCompDirectiveDefault
	})
	o.AddFlags(cmd, true)
	return cmd
}

// Complete reads the plan, builds the pipeline, and a reader of
// kubeadm-config for --from.
func (o *StartOptions) Complete(cmd *cobra.Command, _ []string) error {
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
func (o *StartOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the versions and flags.
func (o *StartOptions) Validate() error {
	if err := versionArg("--to", upgradestate.CheckVersion(o.To)); err != nil {
		return err
	}
	if o.From != "" {
		if err := versionArg("--from", upgradestate.CheckVersion(o.From)); err != nil {
			return err
		}
	}
	for _, n := range o.ControlPlaneNodes {
		if err := upgradestate.CheckNodeName(n); err != nil {
			return exitcode.Usagef("--control-plane-nodes: %w", err)
		}
	}
	return o.validate()
}

// Run instantiates the plan for the control-plane nodes and records the
// start.
func (o *StartOptions) Run(ctx context.Context) error {
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
	return o.write(ctx, func(rec *upgradestate.Record) (*upgradestate.Record, bool, error) {
		next, err := upgradestate.Start(rec, plan, o.clock(), from, o.To, upgradestate.BoundReason(o.Reason))
		return next, err == nil, err
	})
}

// liveVersion reads kubernetesVersion from kubeadm-config, or "" when it
// cannot.
func (o *StartOptions) liveVersion(ctx context.Context) string {
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
