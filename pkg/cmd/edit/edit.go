// Package edit opens the ClusterConfiguration in the user's editor and
// writes the result back through pkg/engine's validated, conflict-safe
// write, merging a change made meanwhile with pkg/clusterconfig's three-way
// merge, with pkg/backup's hook keeping the document it replaces.
package edit

import (
	"os"
	"runtime"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/backup"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/cmd/cmdutil"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/engine"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/operator"
)

const editLong = `Open the ClusterConfiguration in an editor, as plain YAML, and write the
result back with a validated, conflict-safe write.

The editor is $KUBE_EDITOR, else $EDITOR, else vi, as for kubectl edit. An
editor given with arguments ("code --wait") is split on spaces; one with
quotes or backslashes is run through $SHELL. The file starts with a few
comment lines naming the server, the ConfigMap and the resourceVersion; lines
starting with '#' are ignored.

Saving the file unchanged, or emptying it, cancels the edit: nothing is
written and the command exits 0. An invalid document reopens the editor on
your text with the problems listed at the top, until it is valid or saved
unchanged; when stdin or stdout is not a terminal, the command exits 3
instead.

The write goes through the same pipeline as patch: the automatic backup,
--if-leader, the write queue, --timeout, --dry-run, --diff and -o. When the
document changed on the server while the editor was open, your changes are
merged into the live version (three ways: the version you started from,
yours, and the live one), so the other change is kept too. When the same
field was changed on both sides, nothing is overwritten: the editor reopens
on the live version with your other changes applied and the conflicting
fields explained at the top (exit 4 when not interactive). A list counts as
one field.

With --rollout the write and its rollout are one step, as for patch: the
rollout's checks run before the editor opens, and a rollout of exactly the
document written starts after the write (see 'rollout start' for --nodes,
--canary, --try and --wait). A cancelled edit starts nothing.`

const editExample = `  # Edit the ClusterConfiguration in $KUBE_EDITOR, $EDITOR or vi
  kubectl kubeadmcfg edit

  # Use another editor, and show what was written as a diff
  KUBE_EDITOR="code --wait" kubectl kubeadmcfg edit --diff

  # Write even if kubeadm would reject the result, listing the problems
  kubectl kubeadmcfg edit --validate=warn

  # Edit, then carry the result to the control-plane nodes, pausing after the first
  kubectl kubeadmcfg edit --rollout --canary 1`

// Options edit the ClusterConfiguration in an editor.
type Options struct {
	Cluster *cmdutil.ClusterFlags
	Write   *cmdutil.WriteFlags
	Backup  *cmdutil.BackupFlags
	Print   *cmdutil.PrintFlags
	Rollout *cmdutil.RolloutFlags
	// Editor opens the file; Complete chooses it from the environment.
	Editor cmdutil.Editor
	// Interactive reopens the editor on a problem instead of failing;
	// Complete sets it when stdin and stdout are terminals.
	Interactive bool

	engine   *engine.Engine
	operator *operator.Rollouts // with --rollout
	server   string
	genericiooptions.IOStreams
}

// NewOptions returns options with defaults.
func NewOptions(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *Options {
	return &Options{Cluster: cluster, Write: cmdutil.NewWriteFlags(), Backup: cmdutil.NewBackupFlags(), Print: cmdutil.NewPrintFlags(),
		Rollout: cmdutil.NewRolloutFlags(), IOStreams: streams}
}

// NewCmdEdit builds the edit command.
func NewCmdEdit(cluster *cmdutil.ClusterFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(cluster, streams)
	cmd := &cobra.Command{
		Use:     "edit",
		Short:   "Edit the ClusterConfiguration in an editor, with a validated, conflict-safe write",
		Long:    editLong,
		Example: editExample,
		Args:    cobra.NoArgs,
		// No arguments, so nothing to complete: not even file names.
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.Run(cmd.Context(), o, cmd, args)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags binds the options' flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	o.Write.AddFlags(cmd)
	o.Backup.AddFlags(cmd, true)
	o.Rollout.AddFlags(cmd, true)
	o.Print.AddFlags(cmd)
}

// Complete chooses the editor, finds out whether a user is at a terminal,
// and builds the write pipeline.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	o.Write.Complete()
	o.Rollout.Complete(cmd)
	if err := o.Print.Complete(); err != nil {
		return err
	}
	o.Editor = cmdutil.EditorFromEnv(os.Getenv, runtime.GOOS)
	o.Interactive = cmdutil.IsTerminal(o.In) && cmdutil.IsTerminal(o.Out)
	c, err := o.Cluster.Clients()
	if err != nil {
		return err
	}
	o.server = c.Server
	o.engine = o.Write.ToEngine(c, o.Cluster, o.Backup.Hook(c.Server, backup.ReasonBeforeEdit))
	if o.Rollout.Rollout {
		o.operator = cmdutil.NewOperator(c, o.Cluster, o.Write.RetryFlags, o.engine, o.Rollout.Operator(o.Write.Timeout, o.Print.Progress(o.ErrOut)))
	}
	return nil
}

// Validate checks the options without I/O.
func (o *Options) Validate() error {
	if len(o.Editor.Args) == 0 {
		return exitcode.Usagef("no editor to run: set KUBE_EDITOR or EDITOR")
	}
	if err := o.Write.ValidateFlags(); err != nil {
		return err
	}
	if err := o.Rollout.Validate(); err != nil {
		return err
	}
	return o.Backup.Validate()
}

// Result is what edit prints with -o: the write's result, or that the
// edit was cancelled.
type Result struct {
	*cmdutil.WriteResult
	Cancelled bool `json:"cancelled"`
	// KeptFile holds the edited text when it was not written.
	KeptFile string `json:"keptFile,omitempty"`
}
