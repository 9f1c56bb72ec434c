package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// UpgradeFlags are what every upgrade-* command shares: where the state
// lives, how a write is retried and who makes it, and how the result is
// printed. Complete assembles the write pipeline for the state ConfigMap.
type UpgradeFlags struct {
	Cluster        *ClusterFlags
	Print          *PrintFlags
	Retry          *RetryFlags
	StateConfigMap string

	engine *engine.Engine
	genericiooptions.IOStreams
}

// NewUpgradeFlags returns the defaults.
func NewUpgradeFlags(cluster *ClusterFlags, streams genericiooptions.IOStreams) *UpgradeFlags {
	return &UpgradeFlags{Cluster: cluster, Print: NewPrintFlags(), Retry: NewRetryFlags(),
		StateConfigMap: upgrade.DefaultConfigMap, IOStreams: streams}
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

func (f *UpgradeFlags) clock() upgrade.Clock {
	return upgrade.Clock{Now: time.Now(), By: f.Retry.Identity}
}

// explain says where the state was looked for when there is none.
func (f *UpgradeFlags) explain(err error) error {
	if errors.Is(err, upgrade.ErrNoUpgrade) || exitcode.FromError(err) == exitcode.NotFound {
		return exitcode.NotFoundf("no upgrade is recorded in %s (start one with 'kubectl kubeadmcfg upgrade-start')", f.target())
	}
	var transition *upgrade.TransitionError
	if errors.As(err, &transition) {
		return exitcode.WithHint(err, "or use --force")
	}
	return err
}

// write applies op to the record inside a compare-and-swap write, so the
// rule is checked against the state actually replaced, and prints the
// outcome.
func (f *UpgradeFlags) write(ctx context.Context, op upgrade.Op) error {
	var change upgrade.Change
	res, err := f.engine.Update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		var err error
		change, err = upgrade.Apply(cm, op)
		return change.Changed, err
	})
	if err != nil {
		return f.explain(err)
	}
	after := change.After
	if after == nil {
		return f.explain(upgrade.ErrNoUpgrade)
	}
	if !f.Print.Human() {
		return f.Print.Print(f.Out, after)
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(f.Out, "upgrade state unchanged: %s\n", after.State)
	case after.State == upgrade.Started:
		fmt.Fprintf(f.Out, "upgrade started: %s -> %s, state %s\n", orDash(after.FromVersion), after.ToVersion, after.State)
	case change.Before != after.State:
		fmt.Fprintf(f.Out, "upgrade state: %s -> %s\n", change.Before, after.State)
	default:
		fmt.Fprintf(f.Out, "upgrade state: %s (hosts updated)\n", after.State)
	}
	return nil
}

// NewCmdUpgrade builds the upgrade-* commands.
func NewCmdUpgrade(cluster *ClusterFlags, streams genericiooptions.IOStreams) []*cobra.Command {
	return []*cobra.Command{
		NewCmdUpgradeStatus(cluster, streams),
		NewCmdUpgradeStart(cluster, streams),
		NewCmdUpgradeSet(cluster, streams),
		NewCmdUpgradeHost(cluster, streams),
		NewCmdUpgradeFail(cluster, streams),
		NewCmdUpgradeAudit(cluster, streams),
		NewCmdUpgradeDelete(cluster, streams),
	}
}

const stateDiagram = `States, in order (each step may also go to upgrade-aborting):

  upgrade-started
    -> downloading-images      -> downloaded-images       (or downloading-images-failed)
    -> upgrading-networking    -> upgraded-networking     (or upgrading-networking-failed)
    -> upgrading-storage       -> upgraded-storage        (or upgrading-storage-failed)
    -> upgrading-first-master  -> upgraded-first-master   (or upgrading-first-master-failed)
    -> upgrading-second-master -> upgraded-second-master  (or upgrading-second-master-failed)
    -> upgrading-kubelets      -> upgrade-complete        (or upgrading-kubelets-failed)
  upgrade-aborting -> upgrade-aborted                     (or upgrade-aborting-failed)

A step starts from its predecessor or from its own -failed state (a retry).`

// UpgradeDeleteOptions deletes the upgrade state.
type UpgradeDeleteOptions struct {
	*UpgradeFlags
	Force bool
}

// NewCmdUpgradeDelete builds upgrade-delete.
func NewCmdUpgradeDelete(cluster *ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeDeleteOptions{UpgradeFlags: NewUpgradeFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:     "upgrade-delete",
		Short:   "Delete the upgrade state",
		Long:    "Delete the upgrade state ConfigMap, only when the upgrade is complete or aborted, or with --force.",
		Example: "  # Clear a finished upgrade\n  kubectl kubeadmcfg upgrade-delete",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Delete whatever the state")
	o.AddFlags(cmd, true)
	return cmd
}

// Complete builds the pipeline.
func (o *UpgradeDeleteOptions) Complete(*cobra.Command, []string) error { return o.complete() }

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
		if ok && rec != nil {
			state = rec.State
		}
		if !o.Force && ok && !upgrade.Terminal(state) {
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
	fmt.Fprintf(o.Out, "upgrade state deleted (was %s)\n", orDash(string(state)))
	return nil
}
