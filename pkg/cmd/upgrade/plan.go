package upgrade

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// loadPlan reads and checks a plan: a built-in plan's name, or else a plan
// file ("-" for stdin). A file that is not a good plan exits 3 (a template
// is checked as if expanded for two nodes); one that cannot be read, 2.
func loadPlan(ref string, stdin io.Reader) (*upgradestate.Plan, error) {
	if slices.Contains(upgradestate.BuiltinPlans(), ref) {
		return upgradestate.Builtin(ref)
	}
	if ref == "" {
		return nil, exitcode.Usagef("--plan must name a built-in plan (%s) or a file", strings.Join(upgradestate.BuiltinPlans(), ", "))
	}
	data, err := cmdutil.ReadInput(ref, "the plan file", stdin)
	if err != nil {
		return nil, exitcode.WithHint(err, "built-in plans: "+strings.Join(upgradestate.BuiltinPlans(), ", "))
	}
	p, err := upgradestate.ParsePlan(data)
	if err == nil {
		err = p.Check()
	}
	if err != nil {
		return nil, exitcode.New(exitcode.FromError(err), fmt.Errorf("%s: %w", ref, err))
	}
	return p, nil
}

// NewCmdUpgradePlan builds upgrade-plan and its subcommands.
func NewCmdUpgradePlan(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade-plan",
		Short: "Show upgrade plans",
		Long: `An upgrade follows a plan: an ordered list of steps, each with its
in-progress state, its -failed state and the state it reaches, then the
complete state, optional steps after it, an abort branch, and the host steps
every node goes through. upgrade-start --plan chooses it; it is stored with
the upgrade's state.`,
		Example: "  # Show the kubeadm plan\n  kubectl kubeadmcfg upgrade-plan show kubeadm",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exitcode.Usagef("%s needs a subcommand: show (see '%s --help')", cmd.CommandPath(), cmd.CommandPath())
		},
	}
	cmd.AddCommand(NewCmdUpgradePlanShow(cluster, streams))
	return cmd
}

// PlanShowOptions prints a plan.
type PlanShowOptions struct {
	*Flags
	// Plan is a built-in plan's name or a plan file.
	Plan              string
	Current           bool
	ControlPlaneNodes []string

	plan *upgradestate.Plan
}

// NewCmdUpgradePlanShow builds upgrade-plan show.
func NewCmdUpgradePlanShow(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PlanShowOptions{Flags: NewFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:   "show [NAME|FILE|--current]",
		Short: "Print a plan",
		Long: `Print a plan: a built-in one by NAME (starlingx, the default, or kubeadm), a
plan file, checked as upgrade-start checks it (a bad plan exits 3), or with
--current the plan of the recorded upgrade, as stored. Without any, the
default plan. -o yaml prints the plan file format, which upgrade-start
--plan FILE takes: a template's steps for each control-plane node are shown
as written unless --control-plane-nodes expands them.

Plan format (YAML or JSON; apiVersion kubeadmcfg.io/v1alpha1, kind
UpgradePlan):

  name: NAME              lowercase letters, digits, '-'
  start: STATE            default upgrade-started
  complete: STATE         default upgrade-complete
  steps:                  in order
  - name: STATE           the step's in-progress state
    failed: STATE         default NAME-failed; must end in -failed
    reaches: STATE        the state it ends in; none: a phase the next step
                          starts from (its work is done by host steps)
    optional: true        may be skipped
    after: [STATE, ...]   starts after these instead of the step before it
    forEach: control-plane-node
                          one step per control-plane node, {node} in names
    description: TEXT
  afterComplete: [STEP, ...]  steps that may follow complete
  abort: STEP             the branch every state before complete may take
  hostSteps:              statuses each node goes through (upgrade-host)
  - name: STATUS
    failed: STATUS        default NAME-failed
    reaches: STATUS

A plan is refused when a name is not unique, a -failed state is not the
failure of a step in progress, a state is unreachable from the start, or it
takes more than 64 KiB stored.`,
		Example: "  # Show the default plan\n  kubectl kubeadmcfg upgrade-plan show\n\n" +
			"  # Start a plan of your own from the kubeadm plan\n  kubectl kubeadmcfg upgrade-plan show kubeadm -o yaml > my-plan.yaml\n\n" +
			"  # The plan the recorded upgrade follows\n  kubectl kubeadmcfg upgrade-plan show --current",
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return upgradestate.BuiltinPlans(), cobra.ShellCompDirectiveDefault
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVar(&o.Current, "current", o.Current, "Print the plan of the recorded upgrade")
	cmd.Flags().StringSliceVar(&o.ControlPlaneNodes, "control-plane-nodes", o.ControlPlaneNodes, "Expand a template's steps for these control-plane nodes, in order")
	cmd.Flags().DurationVar(&o.Retry.Timeout, "timeout", o.Retry.Timeout, "With --current, give up if the state has not been read within this time")
	o.AddFlags(cmd, false)
	return cmd
}

// Complete reads the plan, or builds the client for --current.
func (o *PlanShowOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Plan = args[0]
	}
	if o.Current {
		if o.Plan != "" {
			return exitcode.Usagef("give a plan or --current, not both")
		}
		return o.complete()
	}
	if o.Plan == "" {
		o.Plan = upgradestate.DefaultPlan
	}
	if err := o.Print.Complete(); err != nil {
		return err
	}
	p, err := loadPlan(o.Plan, cmd.InOrStdin())
	if err != nil {
		return err
	}
	if !p.IsTemplate() || len(o.ControlPlaneNodes) > 0 {
		if p, err = p.Instantiate(o.ControlPlaneNodes); err != nil {
			return err
		}
	}
	o.plan = p
	return nil
}

// Budget bounds the whole command by --timeout.
func (o *PlanShowOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the flags.
func (o *PlanShowOptions) Validate() error {
	if o.Current && len(o.ControlPlaneNodes) > 0 {
		return exitcode.Usagef("--control-plane-nodes expands a plan that is not yet an upgrade's, not --current")
	}
	for _, n := range o.ControlPlaneNodes {
		if err := upgradestate.CheckNodeName(n); err != nil {
			return exitcode.Usagef("--control-plane-nodes: %w", err)
		}
	}
	return o.validate()
}

// Run prints the plan.
func (o *PlanShowOptions) Run(ctx context.Context) error {
	p := o.plan
	if o.Current {
		cm, err := o.engine.Get(ctx) // bounded by --timeout
		if err != nil {
			return o.explain(err)
		}
		rec, ok, err := upgradestate.FromConfigMap(cm)
		if err != nil {
			return err
		}
		if !ok {
			return o.explain(upgradestate.ErrNoUpgrade)
		}
		p = rec.PlanOf()
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, p)
	}
	fmt.Fprintf(o.Out, "plan %s", p.Name)
	if p.Description != "" {
		fmt.Fprintf(o.Out, ": %s", p.Description)
	}
	fmt.Fprintln(o.Out)
	if len(p.ControlPlaneNodes) > 0 {
		fmt.Fprintf(o.Out, "control-plane nodes: %s\n", strings.Join(p.ControlPlaneNodes, ", "))
	}
	fmt.Fprintln(o.Out)
	_, err := fmt.Fprint(o.Out, p.Diagram())
	return err
}
