package rollout

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	rolloutstate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

// HistoryOptions list the last rollouts.
type HistoryOptions struct {
	*Flags
}

// HistoryView is what history prints with -o: the finished rollouts the
// record keeps, oldest first, and the current one while it is active.
type HistoryView struct {
	Record   string                      `json:"record"`
	Rollouts []rolloutstate.HistoryEntry `json:"rollouts"`
}

// NewCmdHistory builds rollout history.
func NewCmdHistory(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &HistoryOptions{Flags: NewFlags(cluster, streams)}
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List the last rollouts: target, who, when, outcome",
		Long: fmt.Sprintf(`List the last %d finished rollouts the record keeps, oldest first, and the
current one while it is active (its outcome is then its phase): id, kind
(rollout, undo, or revert when a try was not confirmed), target document
hash, who started it, when it started and finished, how it ended
(Succeeded, Failed, Undone, Reverted) and why. Exit 0 with an empty list
when no rollout was ever recorded.`, rolloutstate.HistoryLength),
		Example: "  # The last rollouts\n  kubectl kubeadmcfg rollout history\n\n  # As JSON\n  kubectl kubeadmcfg rollout history -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmdutil.AddTimeoutFlag(cmd, &o.Retry.Timeout)
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete builds the operator.
func (o *HistoryOptions) Complete(*cobra.Command, []string) error { return o.complete(nil) }

// Validate checks the flags.
func (o *HistoryOptions) Validate() error { return o.validate() }

// Budget bounds the command by --timeout.
func (o *HistoryOptions) Budget() time.Duration { return o.Retry.Timeout }

// Run prints the history.
func (o *HistoryOptions) Run(ctx context.Context) error {
	r, _, err := o.op.Read(ctx)
	if err != nil {
		return err
	}
	v := &HistoryView{Record: o.record(), Rollouts: append([]rolloutstate.HistoryEntry{}, r.History...)}
	if s := r.Status; s != nil && s.Phase.Active() {
		v.Rollouts = append(v.Rollouts, rolloutstate.HistoryEntry{ID: s.ID, Kind: s.Kind, TargetHash: s.Target.Hash,
			By: s.StartedBy, StartedAt: s.StartedAt, Outcome: s.Phase, Message: s.Message})
	}
	if !o.Print.Human() {
		return o.Print.Print(o.Out, v)
	}
	if len(v.Rollouts) == 0 {
		_, err := fmt.Fprintf(o.ErrOut, "no rollout is recorded in configmap %s\n", v.Record)
		return err
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tKIND\tTARGET\tBY\tSTARTED\tFINISHED\tOUTCOME\tMESSAGE")
	for _, h := range v.Rollouts {
		finished := "-"
		if !h.FinishedAt.IsZero() {
			finished = h.FinishedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.ID, h.Kind, rolloutstate.Short(h.TargetHash), h.By,
			h.StartedAt.UTC().Format(time.RFC3339), finished, h.Outcome, cmdutil.OrDash(h.Message))
	}
	return w.Flush()
}
