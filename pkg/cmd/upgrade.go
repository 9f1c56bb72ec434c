package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// UpgradeFlags are what every upgrade-* command shares: where the state
// lives, how a write is retried and who makes it, and how the result is
// printed. Complete assembles the write pipeline for the state ConfigMap.
type UpgradeFlags struct {
	Cluster        *cmdutil.ClusterFlags
	Print          *cmdutil.PrintFlags
	Retry          *cmdutil.RetryFlags
	StateConfigMap string

	engine *engine.Engine
	now    func() time.Time // the API server's time
	// forceHint: the command has --force, so a refused transition says so.
	forceHint bool
	genericiooptions.IOStreams
}

// NewUpgradeFlags returns the defaults.
func NewUpgradeFlags(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *UpgradeFlags {
	return &UpgradeFlags{Cluster: cluster, Print: cmdutil.NewPrintFlags(), Retry: cmdutil.NewRetryFlags(),
		StateConfigMap: upgrade.DefaultConfigMap, IOStreams: streams, now: cmdutil.LocalNow}
}

// AddFlags binds the flags; writes adds those of commands that write.
func (f *UpgradeFlags) AddFlags(cmd *cobra.Command, writes bool) {
	cmd.Flags().StringVar(&f.StateConfigMap, "state-configmap", f.StateConfigMap, "Name of the ConfigMap that holds the upgrade state (in -n)")
	if writes {
		f.Retry.AddFlags(cmd, "Who is making the change, recorded in the history (default: the hostname)")
	}
	f.Print.AddFlags(cmd)
}

func (f *UpgradeFlags) complete() error {
	f.Retry.Complete()
	if err := f.Print.Complete(); err != nil {
		return err
	}
	c, err := f.Cluster.Clients()
	if err != nil {
		return err
	}
	opts := f.Retry.EngineOptions()
	opts.CreateIfMissing = true
	f.engine = engine.New(c.Client, f.target(), opts)
	f.now = c.Clock.Now
	return nil
}

func (f *UpgradeFlags) validate() error {
	if f.StateConfigMap == "" {
		return exitcode.Usagef("--state-configmap must not be empty")
	}
	return f.Retry.Validate()
}

func (f *UpgradeFlags) target() engine.Target {
	return engine.Target{Namespace: f.Cluster.Namespace(), Name: f.StateConfigMap}
}

// clock stamps transitions with the API server's time, read from the
// responses of this very write, so every host's stamps share one clock.
func (f *UpgradeFlags) clock() upgrade.Clock {
	return upgrade.Clock{Now: f.now(), By: f.Retry.Identity}
}

// explain says where the state was looked for when there is none.
func (f *UpgradeFlags) explain(err error) error {
	if errors.Is(err, upgrade.ErrNoUpgrade) || exitcode.FromError(err) == exitcode.NotFound {
		return exitcode.NotFoundf("no upgrade is recorded in %s (start one with 'kubectl kubeadmcfg upgrade-start')", f.target())
	}
	var transition *upgrade.TransitionError
	if errors.As(err, &transition) && f.forceHint {
		return exitcode.WithHint(err, "or use --force")
	}
	return err
}

// apply runs op on the record inside a compare-and-swap write, so the rule
// is checked against the state actually replaced.
func (f *UpgradeFlags) apply(ctx context.Context, op upgrade.Op) (upgrade.Change, *engine.Result, error) {
	var change upgrade.Change
	res, err := f.engine.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		var err error
		change, err = upgrade.Apply(cm, op)
		return change.Changed, err
	})
	if err != nil {
		return change, res, f.explain(err)
	}
	if change.After == nil {
		return change, res, f.explain(upgrade.ErrNoUpgrade)
	}
	return change, res, nil
}

// write applies op and prints the outcome.
func (f *UpgradeFlags) write(ctx context.Context, op upgrade.Op) error {
	change, res, err := f.apply(ctx, op)
	if err != nil {
		return err
	}
	after := change.After
	if !f.Print.Human() {
		return f.Print.Print(f.Out, after.Status())
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(f.Out, "upgrade state unchanged: %s\n", after.State)
	case change.Before == "" || (after.State == after.PlanOf().Start && change.Before != after.State):
		fmt.Fprintf(f.Out, "upgrade started: %s -> %s, state %s, plan %s\n", cmdutil.OrDash(after.FromVersion), after.ToVersion, after.State, after.PlanOf().Name)
	case change.Before != after.State:
		fmt.Fprintf(f.Out, "upgrade state: %s -> %s\n", change.Before, after.State)
	default:
		fmt.Fprintf(f.Out, "upgrade state: %s (hosts updated)\n", after.State)
	}
	return nil
}

// NewCmdUpgrade builds the upgrade-* commands.
func NewCmdUpgrade(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) []*cobra.Command {
	return []*cobra.Command{
		NewCmdUpgradeStatus(cluster, streams),
		NewCmdUpgradeStart(cluster, streams),
		NewCmdUpgradeSet(cluster, streams),
		NewCmdUpgradeHost(cluster, streams),
		NewCmdUpgradeRun(cluster, streams),
		NewCmdUpgradeFail(cluster, streams),
		NewCmdUpgradeAudit(cluster, streams),
		NewCmdUpgradeDelete(cluster, streams),
		NewCmdUpgradePlan(cluster, streams),
	}
}

// stateDiagram is the default plan, drawn for help texts.
func stateDiagram() string {
	p, err := upgrade.Builtin(upgrade.DefaultPlan)
	if err != nil {
		return ""
	}
	return "The default plan, " + p.Name + " ('kubectl kubeadmcfg upgrade-plan show NAME' prints the others):\n\n" +
		indent(p.Diagram(), "  ") + "\nA step starts from the end of the step before it (past an optional step, also\n" +
		"from where the plan stood before it) or from its own -failed state (a retry)."
}

func indent(text, prefix string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// UpgradeDeleteOptions deletes the upgrade state.
type UpgradeDeleteOptions struct {
	*UpgradeFlags
	Force bool
}

// NewCmdUpgradeDelete builds upgrade-delete.
func NewCmdUpgradeDelete(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeDeleteOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:     "upgrade-delete",
		Short:   "Delete the upgrade state",
		Long:    "Delete the upgrade state ConfigMap, only when the upgrade is complete or aborted, or with --force.",
		Example: "  # Clear a finished upgrade\n  kubectl kubeadmcfg upgrade-delete",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Delete whatever the state")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete builds the pipeline.
func (o *UpgradeDeleteOptions) Complete(*cobra.Command, []string) error { return o.complete() }

// Budget bounds the whole command by --timeout.
func (o *UpgradeDeleteOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the flags.
func (o *UpgradeDeleteOptions) Validate() error { return o.validate() }

// Run deletes the state when the upgrade is over, or with --force.
func (o *UpgradeDeleteOptions) Run(ctx context.Context) error {
	var state upgrade.State
	_, err := o.engine.Delete(ctx, func(cm *corev1.ConfigMap) error {
		rec, ok, err := upgrade.FromConfigMap(cm)
		if err != nil && !o.Force {
			return err
		}
		if !ok || rec == nil {
			return nil
		}
		state = rec.State
		if !o.Force && ok && !rec.PlanOf().Over(state) {
			return exitcode.Conflictf("the upgrade is in %s; delete it only when complete or aborted, or use --force", state)
		}
		return nil
	})
	if err != nil {
		return o.explain(err)
	}
	if !o.Print.Human() {
		t := o.target()
		return o.Print.Print(o.Out, map[string]any{"deleted": t.Namespace + "/" + t.Name, "state": state})
	}
	fmt.Fprintf(o.Out, "upgrade state deleted (was %s)\n", cmdutil.OrDash(string(state)))
	return nil
}
