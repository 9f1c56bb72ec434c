package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	rolloutstate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

const statusLong = `Show the current (or last) rollout: a header with its id, kind, phase,
target document (hash, where it came from, resourceVersion), who started it
and when, and a table with one row per node in the rollout's order: its
phase, the components its turn changes, how long since it started or
finished, its agent ("alive (3s)", "lost (45s)" or "none", judged on the API
server's clock) and whether the node runs the live document as its agent
last found (yes, no, unknown).

-w follows the rollout with a watch on the record and prints it again on
every change until the rollout ends: confirmed or reverted, for one on
trial. It then exits as --wait does: 0 every node runs the target, 8
stopped on a node that rolled itself back, 9 a node's rollback failed, 4
undone or reverted, 7 stopped following first (--timeout). Without -w the
command exits 0 whatever the phase, and 5 when no rollout is recorded.

-o json prints the rollout as stored in the record, with the agent and
in-sync state of each node; with -w, once per change.`

const statusExample = `  # Where the rollout stands
  kubectl kubeadmcfg rollout status

  # Follow it to its end; the exit code says how it ended
  kubectl kubeadmcfg rollout status -w

  # The record's status as JSON
  kubectl kubeadmcfg rollout status -o json`

// StatusOptions show the current rollout.
type StatusOptions struct {
	*Flags
	Watch bool
	// Timeout bounds the command; 0: -w follows until the rollout ends.
	Timeout time.Duration
}

// NewStatusOptions returns the defaults.
func NewStatusOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *StatusOptions {
	return &StatusOptions{Flags: NewFlags(cluster, streams)}
}

// NewCmdStatus builds rollout status.
func NewCmdStatus(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewStatusOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "status [-w] [-o json]",
		Short:   "Show the current rollout, one row per node",
		Long:    statusLong,
		Example: statusExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", o.Watch, "Follow the rollout until it ends, printing it on every change; exit as --wait does")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "Stop after this time (with -w: exit 7, the rollout goes on); 0: no limit")
	o.addStaleAfter(cmd)
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete builds the operator.
func (o *StatusOptions) Complete(*cobra.Command, []string) error { return o.complete(nil) }

// Validate checks the flags.
func (o *StatusOptions) Validate() error {
	if o.Timeout < 0 {
		return exitcode.Usagef("--timeout must not be negative, not %s", o.Timeout)
	}
	return o.validate()
}

// Budget bounds the command by --timeout, when given.
func (o *StatusOptions) Budget() time.Duration { return o.Timeout }

// Run prints the rollout and, with -w, follows it to its end.
func (o *StatusOptions) Run(ctx context.Context) error {
	s, _, _, err := o.op.Current(ctx)
	if err != nil {
		return err
	}
	if !o.Watch {
		return o.show(ctx, s)
	}
	var printErr error
	first := true
	_, err = o.op.Wait(ctx, s.ID, operator.WaitOptions{UntilEnded: true, Progress: func(s *rolloutstate.Status) {
		if !first && o.Print.Human() {
			fmt.Fprintln(o.Out)
		}
		first = false
		if err := o.show(ctx, s); err != nil && printErr == nil {
			printErr = err
		}
	}})
	if printErr != nil {
		return printErr
	}
	return cmdutil.RolloutHint(err)
}

// show prints the rollout once.
func (o *StatusOptions) show(ctx context.Context, s *rolloutstate.Status) error {
	v, err := o.view(ctx, s)
	if err != nil {
		return err
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, v)
	}
	return printStatus(o.Out, v, o.op.Now())
}
