package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	upgradestate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/upgrade"
)

// DeleteOptions deletes the upgrade state.
type DeleteOptions struct {
	*Flags
	Force bool
}

// NewCmdUpgradeDelete builds upgrade-delete.
func NewCmdUpgradeDelete(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DeleteOptions{Flags: NewFlags(cluster, streams)}
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
func (o *DeleteOptions) Complete(*cobra.Command, []string) error { return o.complete() }

// Budget bounds the whole command by --timeout.
func (o *DeleteOptions) Budget() time.Duration { return o.Retry.Timeout }

// Validate checks the flags.
func (o *DeleteOptions) Validate() error { return o.validate() }

// Run deletes the state when the upgrade is over, or with --force.
func (o *DeleteOptions) Run(ctx context.Context) error {
	var state upgradestate.State
	_, err := o.engine.Delete(ctx, func(cm *corev1.ConfigMap) error {
		rec, ok, err := upgradestate.FromConfigMap(cm)
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
