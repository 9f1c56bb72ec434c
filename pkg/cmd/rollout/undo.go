package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
	rolloutstate "github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/rollout"
)

const undoLong = `Take the current (or last) rollout back: put the document the nodes ran
before it back in kubeadm-config, then let the agents take every node it
changed back to that document, one at a time, in reverse order. The undo is
a rollout of its own (kind undo), with its own id, status and history
entry; the rollout it undoes, if still paused or awaiting confirmation, goes
to the history as Undone.

kubeadm-config is put back by compare-and-swap, and only while it holds the
undone rollout's target: if someone changed it since, the undo is refused
(exit 4) and nothing is written, unless --force. The document it replaces is
backed up first, as patch does, unless --no-backup. A rollout whose first
node rolled itself back changed no node: its undo puts the document back
and ends.

Refused (exit 4) with nothing to undo (no rollout recorded, or no previous
document known: the first rollout started from the live document), while a
node is in progress, while the rollout is in progress ('rollout pause' it
first) or reverting. Refused too (exit 4) when the rollout's previous
document is not exactly the one its target replaced (kubeadm-config was
written outside rollouts before it started): the undo would drop those
writes as well, and the error names them (resourceVersions and fields);
--force goes back anyway. An undo that started but did not put kubeadm-config
back (the command was killed) is finished by running 'rollout undo' again.

--wait follows the undo to its end, with the exit codes of 'rollout start
--wait'. Undo again to take the undo back.`

const undoExample = `  # Take the last rollout back, and wait until every node is back
  kubectl kubeadmcfg rollout undo --wait

  # Stop a rollout in progress and take it back
  kubectl kubeadmcfg rollout pause && kubectl kubeadmcfg rollout undo

  # Put the previous document back even though kubeadm-config changed since
  kubectl kubeadmcfg rollout undo --force`

// UndoOptions take the current rollout back.
type UndoOptions struct {
	*Flags
	Backup *cmdutil.BackupFlags
	Force  bool
	Wait   bool

	timeoutGiven bool
}

// NewUndoOptions returns the defaults.
func NewUndoOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *UndoOptions {
	return &UndoOptions{Flags: NewFlags(cluster, streams), Backup: cmdutil.NewBackupFlags()}
}

// NewCmdUndo builds rollout undo.
func NewCmdUndo(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewUndoOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "undo [--force] [--wait]",
		Short:   "Take the last rollout back: the document, then every node it changed",
		Long:    undoLong,
		Example: undoExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	cmd.Flags().BoolVar(&o.Force, "force", o.Force, "Put the previous document back even if kubeadm-config no longer holds the rollout's target, or if going back drops writes no rollout carried")
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until every node is back or the undo stops; the exit code says how it ended (0, 8, 9, 4, 7)")
	o.Backup.AddFlags(cmd, true)
	o.addFlags(cmd)
	return cmd
}

// Complete builds the operator, with kubeadm-config's write pipeline: the
// backup of what the undo replaces, and validation that warns (the
// document put back was live before; an undo must not be stopped by rules
// that changed since).
func (o *UndoOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.timeoutGiven = cmd.Flags().Changed("timeout")
	return o.complete(func(c *cmdutil.Clients) *engine.Engine {
		opts := o.Retry.EngineOptions()
		opts.Validation = engine.ValidationWarn
		if hook := o.Backup.Hook(c.Server, operator.BackupReasonUndo); hook != nil {
			opts.Backup = hook
		}
		return engine.New(c.Client, o.Cluster.Target(engine.DefaultKey), opts)
	})
}

// Validate checks the flags.
func (o *UndoOptions) Validate() error {
	if err := o.Backup.Validate(); err != nil {
		return err
	}
	return o.validate()
}

// Budget bounds the command by --timeout; a wait only when it is given.
func (o *UndoOptions) Budget() time.Duration {
	if o.Wait && !o.timeoutGiven {
		return 0
	}
	return o.Retry.Timeout
}

// Run undoes the rollout and, with --wait, follows the undo.
func (o *UndoOptions) Run(ctx context.Context) error {
	res, err := o.op.Undo(ctx, o.Force)
	if err != nil {
		return cmdutil.RolloutHint(err)
	}
	s := res.Status
	line := fmt.Sprintf("rollout %d (undo) started: undoes rollout %d, back to %s over %s\n", s.ID, res.Undone,
		rolloutstate.Short(s.Target.Hash), orNoNode(s.Order))
	if len(s.LeftOut) > 0 {
		line = strings.TrimSuffix(line, "\n") + fmt.Sprintf("; left out: %s (abandoned, its state unknown)\n", strings.Join(s.LeftOut, ", "))
	}
	if res.Resumed {
		line = fmt.Sprintf("rollout %d (undo) of rollout %d: finished putting kubeadm-config back\n", s.ID, res.Undone)
	}
	out := &Result{Changed: res.Changed, Rollout: s, Undone: res.Undone, LeftAlone: res.LeftAlone, Warnings: res.Warnings}
	if d := res.Document; d != nil {
		out.Document = cmdutil.NewWriteResult(o.op.Config.Target(), d, "put back", false, "")
		line += out.Document.Summary + "\n"
		if d.Backup != "" && o.Print.Human() {
			fmt.Fprintf(o.ErrOut, "backed up the replaced document to %s\n", d.Backup)
		}
	}
	return o.followResult(ctx, out, line, o.Wait)
}

func orNoNode(names []string) string {
	if len(names) == 0 {
		return "no node (the document alone)"
	}
	return strings.Join(names, ", ")
}
