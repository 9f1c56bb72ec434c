// Package rollout is the rollout verb family, shaped like kubectl rollout:
// start, status, pause, resume, confirm, undo, abandon and history, one
// file each.
// They act on the rollout record through pkg/rollout's Operator (imported
// as rolloutstate), whose every write is a compare-and-swap through
// pkg/engine; the agents on the nodes do the rest.
package rollout

import (
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
)

const rolloutLong = `Carry the ClusterConfiguration in kubeadm-config to every control-plane
node, one node at a time, from the API.

A rollout pins one document, byte for byte, in the rollout record (the
ConfigMap kubeadmcfg-rollout in the namespace of kubeadm-config), and the
agent on each control-plane node ('kubectl kubeadmcfg agent') reconfigures
its node from that pinned copy when its turn comes: never two nodes at
once, never a node after one that failed. A node that fails is rolled back
by its agent, and the rollout stops there. The record is readable with
plain kubectl, and every transition is also an Event on it
('kubectl describe configmap kubeadmcfg-rollout').

'rollout start' pins the live document; 'patch', 'edit' and 'restore' with
--rollout write and start in one step. 'rollout status' shows where it
stands, 'pause' and 'resume' hold and release it, 'confirm' keeps a rollout
on trial (--try), 'undo' takes the last one back, 'abandon' gives up on a
node whose agent is gone, 'history' lists the last ten. 'kubectl kubeadmcfg nodes' shows whether each node runs the live
document, rollout or not.

Exit codes of --wait and status -w: 0 every node runs the target; 8 the
rollout stopped on a node that rolled itself back (the nodes after it are
untouched); 9 a node's rollback failed (named); 4 another rollout is active,
a precondition or the preflight refused, or the rollout was undone or
reverted; 7 the outcome is unknown (the wait ended first).`

// NewCmdRollout builds the rollout command and its sub-verbs.
func NewCmdRollout(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Carry the ClusterConfiguration to every control-plane node, one at a time",
		Long:  rolloutLong,
		Example: `  # Carry the live document to every control-plane node, waiting for the end
  kubectl kubeadmcfg rollout start --wait

  # See where it stands, and follow it
  kubectl kubeadmcfg rollout status -w`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitcode.Usagef("%s needs a subcommand: %s (see '%s --help')", cmd.CommandPath(), subcommands(cmd), cmd.CommandPath())
		},
	}
	cmd.AddCommand(
		NewCmdStart(cluster, streams),
		NewCmdStatus(cluster, streams),
		NewCmdPause(cluster, streams),
		NewCmdResume(cluster, streams),
		NewCmdConfirm(cluster, streams),
		NewCmdUndo(cluster, streams),
		NewCmdAbandon(cluster, streams),
		NewCmdHistory(cluster, streams),
	)
	return cmd
}

func subcommands(cmd *cobra.Command) string {
	names := ""
	for i, c := range cmd.Commands() {
		if i > 0 {
			names += ", "
		}
		names += c.Name()
	}
	return names
}

// Flags are what every rollout sub-verb shares: the connection, how a
// write is retried and who makes it, how agents are judged, and the
// output. complete assembles the operator.
type Flags struct {
	Cluster    *cmdutil.ClusterFlags
	Retry      *cmdutil.RetryFlags
	Print      *cmdutil.PrintFlags
	StaleAfter time.Duration

	// preflightWait bounds a start's preflight (see cmdutil.RolloutFlags).
	preflightWait time.Duration
	op            *operator.Rollouts
	genericiooptions.IOStreams
}

// NewFlags returns the defaults.
func NewFlags(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Flags {
	return &Flags{Cluster: cluster, Retry: cmdutil.NewRetryFlags(), Print: cmdutil.NewPrintFlags(),
		IOStreams: streams}
}

// addFlags binds the flags of a sub-verb that writes the record: --timeout,
// --identity (who acts, in the record) and -o.
func (f *Flags) addFlags(cmd *cobra.Command) {
	// The record is written without the write queue (see
	// cmdutil.NewOperator), so of the retry flags only these two apply.
	cmd.Flags().DurationVar(&f.Retry.Timeout, "timeout", f.Retry.Timeout, "Give up (exit 4) if the command has not finished within this time, every read and retry on conflict included")
	cmd.Flags().StringVar(&f.Retry.Identity, "identity", f.Retry.Identity, "Who acts, as the rollout record and its Events show it (default: the hostname)")
	f.Print.AddFlags(cmd)
}

// addStaleAfter binds --stale-after, for the sub-verbs that judge agents.
func (f *Flags) addStaleAfter(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&f.StaleAfter, "stale-after", f.StaleAfter, cmdutil.StaleAfterHelp)
}

// complete builds the operator, with config as kubeadm-config's engine
// (nil: a reader with the retry flags' options).
func (f *Flags) complete(config func(c *cmdutil.Clients) *engine.Engine) error {
	f.Retry.Complete()
	if err := f.Print.Complete(); err != nil {
		return err
	}
	c, err := f.Cluster.Clients()
	if err != nil {
		return err
	}
	var cfg *engine.Engine
	if config != nil {
		cfg = config(c)
	} else {
		cfg = engine.New(c.Client, f.Cluster.Target(engine.DefaultKey), f.Retry.EngineOptions())
	}
	f.op = cmdutil.NewOperator(c, f.Cluster, f.Retry, cfg, cmdutil.OperatorOptions{StaleAfter: f.StaleAfter,
		PreflightWait: f.preflightWait, Progress: f.Print.Progress(f.ErrOut)})
	return nil
}

// validate checks the shared flags.
func (f *Flags) validate() error {
	if err := cmdutil.ValidateStaleAfter(f.StaleAfter); err != nil {
		return err
	}
	return f.Retry.Validate()
}
